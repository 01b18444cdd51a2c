// w8a8_dynamic weight quantisation (calbin/MODEL.md): symmetric int8 with one f32 scale per
// output row, computed on the whole row before any split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace simdev::gen {

// w4af16 (timing-only presets): int4 weights with one f32 scale per group of this many
// consecutive input elements of a row; activations stay 16-bit.
inline constexpr uint64_t kW4af16GroupSize = 128;

struct QuantisedRows {
  size_t rows = 0;
  size_t cols = 0;
  std::vector<int8_t> values;  // [rows, cols] row-major
  std::vector<float> scales;   // [rows]
};

// scale = max|row| / 127, q = round(w / scale) clamped to [-127, 127]. An all-zero row gets
// scale 1 so that dequantisation never divides by zero and still returns zeros.
QuantisedRows quantize_rows(std::span<const float> matrix, size_t rows, size_t cols);
// q * scale, row-major [rows, cols].
std::vector<float> dequantize_rows(const QuantisedRows& quantised);

}  // namespace simdev::gen
