#include "simdev/gen/rng.hpp"

#include "calbin/splitmix64.hpp"

namespace simdev::gen {

uint64_t derive_seed(uint64_t master_seed, std::string_view label) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char ch : label) {
    hash ^= static_cast<uint8_t>(ch);
    hash *= 0x100000001b3ull;
  }
  return calbin::splitmix64(master_seed ^ hash);
}

double NormalStream::next_normal() {
  constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;
  double sum = 0.0;
  for (int i = 0; i < 12; ++i) {
    sum += static_cast<double>(engine_() >> 11) * kTwoToMinus53;
  }
  return sum - 6.0;
}

uint32_t NormalStream::next_below(uint32_t bound) {
  const uint64_t high = engine_() >> 32;
  return static_cast<uint32_t>((high * bound) >> 32);
}

}  // namespace simdev::gen
