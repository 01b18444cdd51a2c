// The references' hot loops get a copy per instruction set, picked once at load: wider
// registers doing the same operations on each element, in the same order, so the same bits.
// Only on loops whose lanes are independent (a float reduction is never reordered), and only
// on functions with internal linkage: Clang 14 drops the attribute from a function declared
// before without it. No FMA contraction (-ffp-contract=off, the top CMakeLists.txt).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <thread>

#include "simdev/device/base/workers.hpp"

// ThreadSanitizer's runtime is not up when an ifunc resolver runs at load: no clones there.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIMDEV_REFERENCE_NO_CLONES 1
#endif
#endif
#if defined(__clang__) && defined(__x86_64__) && !defined(SIMDEV_REFERENCE_NO_CLONES)
#define SIMDEV_REFERENCE_WIDE_LOOPS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SIMDEV_REFERENCE_WIDE_LOOPS
#endif

namespace simdev::gen {

// Runs piece(first, count) over [0, n) on two threads when n is large: the pieces write
// disjoint outputs, so the split changes nothing in them. The golden's own threads run whole
// chains; this lets the longest chain, which runs last and alone, use both cores too. The
// threads are a pool kept for the process (a thread started per call cost more system time
// than the work on a deep-narrow model's small matrices).
inline void split_two(size_t n, const std::function<void(size_t, size_t)>& piece) {
  if (n < 64 || std::thread::hardware_concurrency() < 2) {
    piece(0, n);
    return;
  }
  // The static keeps the pool alive between calls; each call takes it from the registry,
  // under its mutex, so that the pool's construction on whichever thread came first is seen
  // to happen before this thread's use of it (ThreadSanitizer does not count the static's
  // guard as such an edge).
  static const std::shared_ptr<simdev::Workers> keep = simdev::Workers::shared(2);
  const std::shared_ptr<simdev::Workers> pool = simdev::Workers::shared(2);
  const size_t half = n / 2;
  pool->run(2, [&](size_t i) { i == 0 ? piece(0, half) : piece(half, n - half); });
}

}  // namespace simdev::gen
