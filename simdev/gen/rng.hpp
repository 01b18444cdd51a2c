// Deterministic random streams for the generator. Every consumer (one weight tensor, one
// golden prompt) gets its own stream derived from the master seed and a label, so adding a
// tensor or a case does not shift the values of the others.
#pragma once

#include <cstdint>
#include <random>
#include <string_view>

namespace simdev::gen {

// Mixes the master seed with a label (FNV-1a, then SplitMix64 finalisation).
uint64_t derive_seed(uint64_t master_seed, std::string_view label);

class NormalStream {
 public:
  explicit NormalStream(uint64_t seed) : engine_(seed) {}

  // Approximately N(0, 1). Irwin-Hall (sum of 12 uniforms minus 6) rather than
  // std::normal_distribution or Box-Muller: it uses only exact IEEE additions of values
  // from mt19937_64, so every standard library and libm gives bit-identical weights.
  double next_normal();
  // Uniform integer in [0, bound); bound > 0. Multiply-shift keeps it library-independent.
  uint32_t next_below(uint32_t bound);

 private:
  std::mt19937_64 engine_;
};

}  // namespace simdev::gen
