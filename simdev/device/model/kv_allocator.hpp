// Carves contiguous token ranges out of a calbin's KV reservation, first fit. Freed ranges
// merge with their neighbours so that fragmentation is only ever what live ranges cause.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "simdev/device/base/invariants.hpp"

namespace simdev {

struct KvRange {
  uint64_t begin = 0;
  uint64_t tokens = 0;
};

class KvAllocator {
 public:
  KvAllocator(uint64_t total_tokens, Invariants& invariants);

  // The lowest free range that fits; nullopt when no contiguous room exists.
  std::optional<KvRange> allocate(uint64_t tokens);
  // Returns a range that allocate() handed out; false if it is not currently allocated.
  bool release(const KvRange& range);

  uint64_t total_tokens() const { return total_tokens_; }
  uint64_t free_tokens() const { return free_tokens_; }
  uint64_t largest_free_tokens() const;
  size_t free_range_count() const { return free_.size(); }
  size_t live_count() const { return allocated_.size(); }

 private:
  // Free and live ranges tile [0, total) exactly: no gap, no overlap, no two free ranges
  // adjacent, the free count their sum.
  void check_tiling() const;

  Invariants& invariants_;
  uint64_t total_tokens_;
  uint64_t free_tokens_;
  std::map<uint64_t, uint64_t> free_;       // begin -> tokens, never adjacent
  std::map<uint64_t, uint64_t> allocated_;  // begin -> tokens
};

}  // namespace simdev
