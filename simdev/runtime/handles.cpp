#include "simdev/runtime/handles.hpp"

namespace simdev::runtime {
namespace {

constexpr unsigned kKindShift = 60;
constexpr unsigned kDeviceShift = 52;
constexpr unsigned kIndexShift = 32;
constexpr uint64_t kIndexMask = (uint64_t{1} << 20) - 1;
constexpr uint64_t kDeviceMask = 0xFF;

static_assert(sizeof(uintptr_t) == 8, "handles pack 64 bits into a pointer value");
static_assert(Device::kMaxBuffers <= kIndexMask + 1 && Device::kMaxJobs <= kIndexMask + 1 &&
                  Device::kMaxKvHandles <= kIndexMask + 1,
              "object tables must fit the handle's index field");

struct DeviceSlot {
  std::shared_ptr<DeviceEntry> entry;
};

struct HandleRegistry {
  std::mutex mutex;
  HandleTable<DeviceSlot> devices{kMaxDevices};
};

HandleRegistry& handle_registry() {
  static auto* instance = new HandleRegistry();  // never destroyed: safe during static teardown
  return *instance;
}

}  // namespace

uintptr_t encode_handle(HandleKind kind, uint32_t device_index, ObjectId object) {
  return (uint64_t{static_cast<uint32_t>(kind)} << kKindShift) |
         ((uint64_t{device_index} & kDeviceMask) << kDeviceShift) |
         ((uint64_t{object.index} & kIndexMask) << kIndexShift) | object.generation;
}

std::optional<std::pair<uint32_t, ObjectId>> decode_handle(uintptr_t value, HandleKind kind) {
  const uint64_t bits = value;
  if ((bits >> kKindShift) != static_cast<uint32_t>(kind)) {
    return std::nullopt;
  }
  const auto device_index = static_cast<uint32_t>((bits >> kDeviceShift) & kDeviceMask);
  const ObjectId object{static_cast<uint32_t>((bits >> kIndexShift) & kIndexMask),
                        static_cast<uint32_t>(bits & 0xFFFFFFFFu)};
  if (object.generation == 0) {
    return std::nullopt;
  }
  return std::make_pair(device_index, object);
}

std::optional<std::pair<ObjectId, std::shared_ptr<DeviceEntry>>> register_device(
    std::unique_ptr<Device> device) {
  HandleRegistry& r = handle_registry();
  auto entry = std::make_shared<DeviceEntry>();
  entry->device = std::move(device);
  std::lock_guard lock(r.mutex);
  auto id = r.devices.insert(std::make_unique<DeviceSlot>(DeviceSlot{entry}));
  if (!id) {
    return std::nullopt;
  }
  entry->index = id->index;
  return std::make_pair(*id, entry);
}

std::shared_ptr<DeviceEntry> find_device(uint32_t index, uint32_t generation) {
  HandleRegistry& r = handle_registry();
  std::lock_guard lock(r.mutex);
  const DeviceSlot* slot = r.devices.find(ObjectId{index, generation});
  return slot ? slot->entry : nullptr;
}

std::shared_ptr<DeviceEntry> find_device_at(uint32_t index) {
  HandleRegistry& r = handle_registry();
  std::lock_guard lock(r.mutex);
  const DeviceSlot* slot = r.devices.at(index);
  return slot ? slot->entry : nullptr;
}

std::shared_ptr<DeviceEntry> unregister_device(uint32_t index, uint32_t generation) {
  HandleRegistry& r = handle_registry();
  std::lock_guard lock(r.mutex);
  const DeviceSlot* slot = r.devices.find(ObjectId{index, generation});
  if (slot == nullptr) {
    return nullptr;
  }
  auto entry = slot->entry;
  r.devices.erase(ObjectId{index, generation});
  return entry;
}

}  // namespace simdev::runtime
