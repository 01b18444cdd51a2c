// Per-subsystem random streams derived from the device's master seed. Each subsystem names
// its stream ("faults", "links", ...), so adding a stream never shifts another's numbers.
// SplitMix64 (calbin/splitmix64.hpp): tiny, fast, and identical on every platform.
#pragma once

#include <cstdint>
#include <string_view>

#include "calbin/splitmix64.hpp"

namespace simdev {

class RandomStream {
 public:
  RandomStream(uint64_t master_seed, std::string_view subsystem)
      : rng_(master_seed ^ hash_name(subsystem)) {}

  uint64_t next() { return rng_.next(); }

  // Uniform in [0, bound) for bound > 0 (the modulo bias is negligible for small bounds).
  uint64_t below(uint64_t bound) { return rng_.below(bound); }

 private:
  // FNV-1a: a stable hash of the subsystem's name.
  static uint64_t hash_name(std::string_view name) {
    uint64_t hash = 0xCBF29CE484222325ull;
    for (char c : name) {
      hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
    }
    return hash;
  }

  calbin::SplitMix64 rng_;
};

}  // namespace simdev
