#include "simdev/service/client/objects/client_handles.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace simdev::service::client {
namespace {

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
