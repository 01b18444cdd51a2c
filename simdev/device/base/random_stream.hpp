// Per-subsystem random streams derived from the device's master seed. Each subsystem names
// its stream ("faults", "links", ...), so adding a stream never shifts another's numbers.
// SplitMix64: tiny, fast, and identical on every platform.
#pragma once

#include <cstdint>
#include <string_view>

namespace simdev {

class RandomStream {
 public:
  RandomStream(uint64_t master_seed, std::string_view subsystem)
      : state_(master_seed ^ hash_name(subsystem)) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound) for bound > 0 (the modulo bias is negligible for small bounds).
  uint64_t below(uint64_t bound) { return bound == 0 ? 0 : next() % bound; }

 private:
  // FNV-1a: a stable hash of the subsystem's name.
  static uint64_t hash_name(std::string_view name) {
    uint64_t hash = 0xCBF29CE484222325ull;
    for (char c : name) {
      hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
    }
    return hash;
  }

  uint64_t state_;
};

}  // namespace simdev
