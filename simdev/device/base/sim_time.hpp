// Device time: integer picoseconds on the virtual clock. Never floating point, never wall
// time, so that every run with the same inputs lands on the same instants.
#pragma once

#include <cstdint>
#include <limits>

namespace simdev {

using TimePs = uint64_t;

inline constexpr TimePs kPsPerNs = 1000;
inline constexpr TimePs kPsPerUs = 1000 * kPsPerNs;
inline constexpr TimePs kPsPerMs = 1000 * kPsPerUs;
inline constexpr TimePs kPsPerS = 1000 * kPsPerMs;
inline constexpr TimePs kTimeNever = std::numeric_limits<TimePs>::max();

// Saturating conversions: a huge timeout means "far in the future", never a wrap-around.
inline TimePs ns_to_ps(uint64_t ns) {
  return ns > kTimeNever / kPsPerNs ? kTimeNever : ns * kPsPerNs;
}
inline uint64_t ps_to_ns(TimePs ps) { return ps / kPsPerNs; }
inline TimePs saturating_add(TimePs a, TimePs b) { return a > kTimeNever - b ? kTimeNever : a + b; }
inline TimePs saturating_mul(TimePs ps, uint64_t factor) {
  return factor != 0 && ps > kTimeNever / factor ? kTimeNever : ps * factor;
}

}  // namespace simdev
