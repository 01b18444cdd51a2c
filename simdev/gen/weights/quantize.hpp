// Weight quantisation (calbin/MODEL.md, "Weights"): w8a8_dynamic, symmetric int8 with one
// f32 scale per output row; w4af16, symmetric int4 with one f32 scale per group of inputs.
// Both are computed on the whole matrix before any split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace simdev::gen {

// w4af16's default group: the inputs of a row that share one scale.
inline constexpr uint64_t kW4af16GroupSize = 128;

struct QuantisedMatrix {
  size_t rows = 0;
  size_t cols = 0;
  size_t group = 0;            // inputs per scale: cols for w8a8_dynamic (one scale per row)
  std::vector<int8_t> values;  // [rows, cols] row-major; int4 values unpacked, in [-7, 7]
  std::vector<float> scales;   // [rows, cols / group] row-major
  size_t groups_per_row() const { return cols / group; }
};

// scale = max|row| / 127, q = round(w / scale) clamped to [-127, 127]. An all-zero row gets
// scale 1 so that dequantisation never divides by zero and still returns zeros.
QuantisedMatrix quantize_rows(std::span<const float> matrix, size_t rows, size_t cols);
// The same per group of `group` inputs with 7 in place of 127. `group` divides cols.
QuantisedMatrix quantize_int4_groups(std::span<const float> matrix, size_t rows, size_t cols,
                                     size_t group);
// q * its group's scale, row-major [rows, cols].
std::vector<float> dequantize(const QuantisedMatrix& quantised);

// Two int4 values per byte, the even element in the low nibble, two's complement.
std::vector<uint8_t> pack_int4(std::span<const int8_t> values);

}  // namespace simdev::gen
