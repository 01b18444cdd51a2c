// Remembers what recently released ids were, so that a stale handle's error can say
// "kv handle #3 was freed" instead of only "invalid". Bounded: the oldest entries go first.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

#include "simdev/device/base/handle_table.hpp"

namespace simdev {

class Tombstones {
 public:
  static constexpr size_t kCapacity = 4096;

  // label: e.g. "kv handle #3 was freed".
  void bury(ObjectId id, std::string label) {
    if (order_.size() >= kCapacity) {
      labels_.erase(order_.front());
      order_.pop_front();
    }
    order_.push_back(id.generation);
    labels_[id.generation] = std::move(label);
  }

  // The label of a released id; fallback when it was never issued or is long forgotten.
  std::string describe(ObjectId id, const std::string& fallback) const {
    const auto it = labels_.find(id.generation);
    return it == labels_.end() ? fallback : it->second;
  }

 private:
  std::deque<uint32_t> order_;  // generations are process-unique, so they key the map
  std::unordered_map<uint32_t, std::string> labels_;
};

}  // namespace simdev
