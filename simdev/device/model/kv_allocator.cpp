#include "simdev/device/model/kv_allocator.hpp"

#include <algorithm>
#include <iterator>

namespace simdev {

KvAllocator::KvAllocator(uint64_t total_tokens, Invariants& invariants)
    : invariants_(invariants), total_tokens_(total_tokens), free_tokens_(total_tokens) {
  if (total_tokens > 0) {
    free_.emplace(0, total_tokens);
  }
}

std::optional<KvRange> KvAllocator::allocate(uint64_t tokens) {
  if (tokens == 0) {
    return std::nullopt;
  }
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < tokens) {
      continue;
    }
    const KvRange range{it->first, tokens};
    const uint64_t rest = it->second - tokens;
    free_.erase(it);
    if (rest > 0) {
      free_.emplace(range.begin + tokens, rest);
    }
    const bool fresh = allocated_.emplace(range.begin, tokens).second;
    SIMDEV_ASSERT(invariants_, fresh);
    SIMDEV_ASSERT(invariants_, free_tokens_ >= tokens);
    free_tokens_ -= tokens;
    check_tiling();
    return range;
  }
  return std::nullopt;
}

bool KvAllocator::release(const KvRange& range) {
  const auto live = allocated_.find(range.begin);
  if (live == allocated_.end() || live->second != range.tokens) {
    return false;
  }
  allocated_.erase(live);
  free_tokens_ += range.tokens;
  auto [it, inserted] = free_.emplace(range.begin, range.tokens);
  // Merge with the following range, then with the preceding one.
  if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
  SIMDEV_ASSERT(invariants_, inserted);
  check_tiling();
  return inserted;
}

void KvAllocator::check_tiling() const {
  // Walks both maps in address order; the handles of one calbin are few, so this costs
  // little beside the allocation itself.
  uint64_t at = 0;
  uint64_t free_sum = 0;
  auto free_it = free_.begin();
  auto live_it = allocated_.begin();
  bool previous_free = false;
  while (free_it != free_.end() || live_it != allocated_.end()) {
    const bool take_free =
        live_it == allocated_.end() || (free_it != free_.end() && free_it->first < live_it->first);
    const auto [begin, tokens] = take_free ? *free_it++ : *live_it++;
    SIMDEV_ASSERT(invariants_, begin == at);
    SIMDEV_ASSERT(invariants_, !(take_free && previous_free));
    at = begin + tokens;
    if (take_free) free_sum += tokens;
    previous_free = take_free;
  }
  SIMDEV_ASSERT(invariants_, at == total_tokens_);
  SIMDEV_ASSERT(invariants_, free_sum == free_tokens_);
}

uint64_t KvAllocator::largest_free_tokens() const {
  uint64_t largest = 0;
  for (const auto& [begin, tokens] : free_) {
    largest = std::max(largest, tokens);
  }
  return largest;
}

}  // namespace simdev
