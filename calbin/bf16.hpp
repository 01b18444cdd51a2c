// BF16 <-> FP32. BF16 is the top half of an IEEE float; rounding is to nearest, ties to
// even, as the device's conversion units do.
#pragma once

#include <bit>
#include <cstdint>

namespace calbin {

inline uint16_t f32_to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // keep NaN a (quiet) NaN
  }
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16_to_f32(uint16_t value) {
  return std::bit_cast<float>(static_cast<uint32_t>(value) << 16);
}

// Rounds an FP32 value to the nearest BF16-representable value.
inline float round_to_bf16(float value) { return bf16_to_f32(f32_to_bf16(value)); }

}  // namespace calbin
