// SplitMix64 (Steele, Lea, Flood 2014): a small generator with a fixed, portable output
// sequence. The simulator's random streams, the runner's prompts and sampling and the
// benchmarks draw from it, so that one seed reproduces the same numbers on any platform and
// standard library. Header-only: every library that links calbin can include it.
#pragma once

#include <cstdint>

namespace calbin {

class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t seed) : state_(seed) {}

  constexpr uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 53 random bits (exact in a double).
  constexpr double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform-ish in [0, bound) by modulo (the bias is below 2^-40 for bound < 2^24); 0, and
  // no draw, for bound 0.
  constexpr uint64_t below(uint64_t bound) { return bound == 0 ? 0 : next() % bound; }

 private:
  uint64_t state_;
};

// One output of SplitMix64 seeded with x: a stateless mix of a counter or a key.
constexpr uint64_t splitmix64(uint64_t x) { return SplitMix64(x).next(); }

}  // namespace calbin
