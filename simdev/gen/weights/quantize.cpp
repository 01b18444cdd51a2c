#include "simdev/gen/weights/quantize.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace simdev::gen {

QuantisedRows quantize_rows(std::span<const float> matrix, size_t rows, size_t cols) {
  assert(matrix.size() == rows * cols);
  QuantisedRows out{rows, cols, std::vector<int8_t>(rows * cols), std::vector<float>(rows)};
  for (size_t r = 0; r < rows; ++r) {
    const std::span<const float> row = matrix.subspan(r * cols, cols);
    float max_abs = 0.0f;
    for (const float w : row) {
      max_abs = std::max(max_abs, std::fabs(w));
    }
    const float scale = max_abs > 0.0f ? max_abs / 127.0f : 1.0f;
    out.scales[r] = scale;
    for (size_t c = 0; c < cols; ++c) {
      const long q = std::lround(row[c] / scale);
      out.values[r * cols + c] = static_cast<int8_t>(std::clamp(q, -127L, 127L));
    }
  }
  return out;
}

std::vector<float> dequantize_rows(const QuantisedRows& quantised) {
  std::vector<float> out(quantised.rows * quantised.cols);
  for (size_t r = 0; r < quantised.rows; ++r) {
    for (size_t c = 0; c < quantised.cols; ++c) {
      const size_t at = r * quantised.cols + c;
      out[at] = static_cast<float>(quantised.values[at]) * quantised.scales[r];
    }
  }
  return out;
}

}  // namespace simdev::gen
