#include "simdev/service/client/client_handles.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace simdev::service::client {
namespace {

constexpr unsigned kKindShift = 60;
constexpr unsigned kDeviceShift = 52;
constexpr unsigned kIndexShift = 32;
constexpr uint64_t kIndexMask = kMaxObjects - 1;
constexpr uint64_t kDeviceMask = kMaxDevices - 1;

static_assert(sizeof(uintptr_t) == 8, "handles pack 64 bits into a pointer value");

struct DeviceSlot {
  uint32_t generation = 0;
  std::shared_ptr<ClientDevice> device;
};

struct HandleRegistry {
  std::mutex mutex;
  DeviceSlot slots[kMaxDevices];
};

HandleRegistry& handle_registry() {
  static auto* instance = new HandleRegistry();  // never destroyed: safe during static teardown
  return *instance;
}

}  // namespace

uint32_t next_generation() {
  static std::atomic<uint32_t> counter{0};
  uint32_t g = 0;
  do {
    g = counter.fetch_add(1, std::memory_order_relaxed) + 1;
  } while (g == 0);  // 0 marks a free slot and is never issued
  return g;
}

uintptr_t encode_handle(HandleKind kind, uint32_t device_slot, LocalId id) {
  return (uint64_t{static_cast<uint32_t>(kind)} << kKindShift) |
         ((uint64_t{device_slot} & kDeviceMask) << kDeviceShift) |
         ((uint64_t{id.index} & kIndexMask) << kIndexShift) | id.generation;
}

std::optional<std::pair<uint32_t, LocalId>> decode_handle(uintptr_t value, HandleKind kind) {
  const uint64_t bits = value;
  if ((bits >> kKindShift) != static_cast<uint32_t>(kind)) {
    return std::nullopt;
  }
  const auto slot = static_cast<uint32_t>((bits >> kDeviceShift) & kDeviceMask);
  const LocalId id{static_cast<uint32_t>((bits >> kIndexShift) & kIndexMask),
                   static_cast<uint32_t>(bits & 0xFFFFFFFFu)};
  if (id.generation == 0) {
    return std::nullopt;
  }
  return std::make_pair(slot, id);
}

std::string handle_text(const void* handle) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", handle);
  return text;
}

std::optional<LocalId> register_device(std::shared_ptr<ClientDevice> device, uint32_t* slot) {
  HandleRegistry& r = handle_registry();
  std::lock_guard lock(r.mutex);
  for (uint32_t i = 0; i < kMaxDevices; ++i) {
    if (!r.slots[i].device) {
      r.slots[i].generation = next_generation();
      r.slots[i].device = std::move(device);
      *slot = i;
      return LocalId{0, r.slots[i].generation};
    }
  }
  return std::nullopt;
}

std::shared_ptr<ClientDevice> find_device(uint32_t slot, uint32_t generation) {
  HandleRegistry& r = handle_registry();
  std::lock_guard lock(r.mutex);
  if (slot >= kMaxDevices || r.slots[slot].generation != generation) return nullptr;
  return r.slots[slot].device;
}

std::shared_ptr<ClientDevice> find_device_at(uint32_t slot) {
  HandleRegistry& r = handle_registry();
  std::lock_guard lock(r.mutex);
  return slot < kMaxDevices ? r.slots[slot].device : nullptr;
}

std::shared_ptr<ClientDevice> unregister_device(uint32_t slot, uint32_t generation) {
  HandleRegistry& r = handle_registry();
  std::lock_guard lock(r.mutex);
  if (slot >= kMaxDevices || r.slots[slot].generation != generation || !r.slots[slot].device) {
    return nullptr;
  }
  auto device = std::move(r.slots[slot].device);
  r.slots[slot] = DeviceSlot{};
  return device;
}

}  // namespace simdev::service::client
