#include "simdev/device/base/handle_table.hpp"

#include <atomic>

namespace simdev {

uint32_t next_generation() {
  static std::atomic<uint32_t> counter{0};
  uint32_t generation = counter.fetch_add(1, std::memory_order_relaxed) + 1;
  // After 2^32 issues the counter wraps; skip 0 so that it stays "never issued".
  if (generation == 0) {
    generation = counter.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  return generation;
}

}  // namespace simdev
