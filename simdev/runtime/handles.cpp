#include "simdev/runtime/handles.hpp"

namespace simdev::runtime {
namespace {

static_assert(Device::kMaxBuffers <= kMaxObjects && Device::kMaxJobs <= kMaxObjects &&
                  Device::kMaxKvHandles <= kMaxObjects,
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
