// Client handles are numbers, never pointers: a device slot and a local id packed by the
// simulator's codec (simdev/device/base/handle_codec.hpp). Generations come from one
// process-wide counter, so a handle of a destroyed device never matches an object of the
// device that later takes its slot. Decoding checks kind, slot, index and generation against
// the tables before anything is touched, so NULL, forged, released and other-device handles
// are INVALID_HANDLE without a round trip.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "simdev/device/base/handle_codec.hpp"

namespace simdev::service::client {

// An object's id in its device's table of that kind.
using LocalId = ObjectId;

uint32_t next_generation();

std::string handle_text(const void* handle);

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
