// A bounded table of objects addressed by generation-checked ids. A released slot gets a
// new generation when reused, so a stale id (freed, double-freed or forged) never resolves.
// Generations come from one counter per library, so an id is never valid in two tables.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "simdev/device/base/handle_codec.hpp"
#include "simdev/device/base/invariants.hpp"

namespace simdev {

// The next process-wide generation (never 0). Thread-safe. Inline: each library that holds
// tables (the simulator's runtime, the service client) counts its own.
inline uint32_t next_generation() {
  static std::atomic<uint32_t> counter{0};
  uint32_t generation = 0;
  do {
    generation = counter.fetch_add(1, std::memory_order_relaxed) + 1;
  } while (generation == 0);  // after 2^32 issues it wraps; 0 stays "never issued"
  return generation;
}

// Ptr owns the objects: std::unique_ptr on the device, std::shared_ptr in the service client,
// whose calls keep an object alive while they use it (share()).
template <class T, class Ptr = std::unique_ptr<T>>
class HandleTable {
 public:
  // invariants: the owning device's checks (invariants.hpp); none for a table outside a device.
  // first_index: slots below it are never issued (the client's index 0 is the device's own).
  explicit HandleTable(uint32_t capacity, Invariants* invariants = nullptr,
                       uint32_t first_index = 0)
      : capacity_(capacity), invariants_(invariants), first_index_(first_index) {}

  // Stores object; nullopt when the table is full.
  std::optional<ObjectId> insert(Ptr object) {
    uint32_t index = 0;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      if (slots_.size() < first_index_) slots_.resize(first_index_);
      if (slots_.size() >= capacity_) return std::nullopt;
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
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
    const Slot* slot = live(id);
    return slot != nullptr ? slot->object.get() : nullptr;
  }
  // The owning pointer itself (a shared one: the caller keeps the object alive).
  Ptr share(ObjectId id) const {
    const Slot* slot = live(id);
    return slot != nullptr ? slot->object : Ptr();
  }

  // The live object in slot index, whatever its generation (nullptr when empty).
  T* at(uint32_t index) const {
    return index < slots_.size() ? slots_[index].object.get() : nullptr;
  }

  // Releases the object and hands it back; empty when the id does not resolve.
  Ptr erase(ObjectId id) {
    if (live(id) == nullptr) return Ptr();
    Ptr object = std::move(slots_[id.index].object);
    slots_[id.index] = Slot{};
    free_.push_back(id.index);
    return object;
  }

  void clear() {
    slots_.clear();
    free_.clear();
  }

  // Calls fn(id, object) for every live object, in index order (deterministic).
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (uint32_t i = first_index_; i < slots_.size(); ++i) {
      if (slots_[i].object) {
        fn(ObjectId{i, slots_[i].generation}, *slots_[i].object);
      }
    }
  }

  size_t live_count() const {
    return slots_.size() - free_.size() - std::min<size_t>(first_index_, slots_.size());
  }
  uint32_t capacity() const { return capacity_; }

 private:
  struct Slot {
    uint32_t generation = 0;
    Ptr object;
  };
  const Slot* live(ObjectId id) const {
    if (id.index < first_index_ || id.index >= slots_.size()) return nullptr;
    const Slot& slot = slots_[id.index];
    return slot.object && slot.generation == id.generation ? &slot : nullptr;
  }

  uint32_t capacity_;
  Invariants* invariants_;
  uint32_t first_index_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace simdev
