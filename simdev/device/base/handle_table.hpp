// A bounded table of objects addressed by generation-checked ids. A released slot gets a
// new generation when reused, so a stale id (freed, double-freed or forged) never resolves.
// Generations come from one process-wide counter, so an id is never valid in two tables.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "simdev/device/base/handle_codec.hpp"
#include "simdev/device/base/invariants.hpp"

namespace simdev {

// The next process-wide generation (never 0). Thread-safe.
uint32_t next_generation();

template <class T>
class HandleTable {
 public:
  // invariants: the owning device's checks (invariants.hpp); none for a table outside a device.
  explicit HandleTable(uint32_t capacity, Invariants* invariants = nullptr)
      : capacity_(capacity), invariants_(invariants) {}

  // Stores object; nullopt when the table is full.
  std::optional<ObjectId> insert(std::unique_ptr<T> object) {
    uint32_t index = 0;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else if (slots_.size() < capacity_) {
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    } else {
      return std::nullopt;
    }
    Slot& slot = slots_[index];
    // A slot on the free list holds nothing: reusing a live one would orphan its object and
    // hand its id to another.
    if (invariants_ != nullptr) SIMDEV_ASSERT(*invariants_, !slot.object);
    slot.generation = next_generation();
    slot.object = std::move(object);
    return ObjectId{index, slot.generation};
  }

  T* find(ObjectId id) const {
    if (id.index >= slots_.size()) {
      return nullptr;
    }
    const Slot& slot = slots_[id.index];
    return slot.object && slot.generation == id.generation ? slot.object.get() : nullptr;
  }

  // The live object in slot index, whatever its generation (nullptr when empty).
  T* at(uint32_t index) const {
    return index < slots_.size() ? slots_[index].object.get() : nullptr;
  }

  // Releases the object; false when the id does not resolve.
  bool erase(ObjectId id) {
    if (find(id) == nullptr) {
      return false;
    }
    slots_[id.index].object.reset();
    free_.push_back(id.index);
    return true;
  }

  // Calls fn(id, object) for every live object, in index order (deterministic).
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].object) {
        fn(ObjectId{i, slots_[i].generation}, *slots_[i].object);
      }
    }
  }

  size_t live_count() const { return slots_.size() - free_.size(); }
  uint32_t capacity() const { return capacity_; }

 private:
  struct Slot {
    uint32_t generation = 0;
    std::unique_ptr<T> object;
  };
  uint32_t capacity_;
  Invariants* invariants_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace simdev
