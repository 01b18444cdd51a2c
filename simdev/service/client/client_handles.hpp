// Client handles are numbers, never pointers: kind (4 bits), device slot (8 bits), local
// index (20 bits) and generation (32 bits) packed into the pointer value, as the simulator's
// are. Generations come from one process-wide counter, so a handle of a destroyed device
// never matches an object of the device that later takes its slot. Decoding checks kind,
// slot, index and generation against the tables before anything is touched, so NULL,
// forged, released and other-device handles are INVALID_HANDLE without a round trip.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace simdev::service::client {

enum class HandleKind : uint32_t { kDevice = 1, kCalbin = 2, kBuffer = 3, kJob = 4, kKv = 5 };

struct LocalId {
  uint32_t index = 0;
  uint32_t generation = 0;
};

inline constexpr uint32_t kMaxDevices = 256;
inline constexpr uint32_t kMaxObjects = 1u << 20;

uint32_t next_generation();

uintptr_t encode_handle(HandleKind kind, uint32_t device_slot, LocalId id);
// The device slot and local id, or nullopt when the value cannot be a handle of that kind.
std::optional<std::pair<uint32_t, LocalId>> decode_handle(uintptr_t value, HandleKind kind);
std::string handle_text(const void* handle);

template <class Handle>
Handle* to_handle(HandleKind kind, uint32_t device_slot, LocalId id) {
  return reinterpret_cast<Handle*>(encode_handle(kind, device_slot, id));
}

// Objects of one kind of one device, by local id. Not thread-safe: the device's mutex
// guards it.
template <class T>
class ObjectTable {
 public:
  std::optional<LocalId> insert(std::shared_ptr<T> object) {
    uint32_t index = 0;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      // Index 0 stays unused: the device handle uses it.
      if (slots_.empty()) slots_.emplace_back();
      if (slots_.size() >= kMaxObjects) return std::nullopt;
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    Slot& slot = slots_[index];
    slot.generation = next_generation();
    slot.object = std::move(object);
    return LocalId{index, slot.generation};
  }
  std::shared_ptr<T> find(LocalId id) const {
    if (id.index == 0 || id.index >= slots_.size()) return nullptr;
    const Slot& slot = slots_[id.index];
    return slot.generation == id.generation ? slot.object : nullptr;
  }
  std::shared_ptr<T> erase(LocalId id) {
    auto object = find(id);
    if (object) {
      slots_[id.index] = Slot{};
      free_.push_back(id.index);
    }
    return object;
  }
  template <class Fn>
  void for_each(Fn&& fn) {
    for (uint32_t i = 1; i < slots_.size(); ++i) {
      if (slots_[i].object) fn(LocalId{i, slots_[i].generation}, *slots_[i].object);
    }
  }
  void clear() {
    slots_.clear();
    free_.clear();
  }

 private:
  struct Slot {
    uint32_t generation = 0;
    std::shared_ptr<T> object;
  };
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

struct ClientDevice;

// The process's open client devices.
std::optional<LocalId> register_device(std::shared_ptr<ClientDevice> device, uint32_t* slot);
std::shared_ptr<ClientDevice> find_device(uint32_t slot, uint32_t generation);
// The device in a slot, whatever its generation (object handles carry only the slot).
std::shared_ptr<ClientDevice> find_device_at(uint32_t slot);
std::shared_ptr<ClientDevice> unregister_device(uint32_t slot, uint32_t generation);

}  // namespace simdev::service::client
