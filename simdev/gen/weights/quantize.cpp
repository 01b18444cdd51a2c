#include "simdev/gen/weights/quantize.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace simdev::gen {
namespace {

QuantisedMatrix quantize_groups(std::span<const float> matrix, size_t rows, size_t cols,
                                size_t group, long limit) {
  assert(matrix.size() == rows * cols);
  assert(group > 0 && cols % group == 0);
  QuantisedMatrix out{rows, cols, group, std::vector<int8_t>(rows * cols),
                      std::vector<float>(rows * (cols / group))};
  for (size_t g = 0; g < out.scales.size(); ++g) {
    const std::span<const float> values = matrix.subspan(g * group, group);
    float max_abs = 0.0f;
    for (const float w : values) {
      max_abs = std::max(max_abs, std::fabs(w));
    }
    const float scale = max_abs > 0.0f ? max_abs / static_cast<float>(limit) : 1.0f;
    out.scales[g] = scale;
    for (size_t i = 0; i < group; ++i) {
      const long q = std::lround(values[i] / scale);
      out.values[g * group + i] = static_cast<int8_t>(std::clamp(q, -limit, limit));
    }
  }
  return out;
}

}  // namespace

QuantisedMatrix quantize_rows(std::span<const float> matrix, size_t rows, size_t cols) {
  return quantize_groups(matrix, rows, cols, cols, 127);
}

QuantisedMatrix quantize_int4_groups(std::span<const float> matrix, size_t rows, size_t cols,
                                     size_t group) {
  return quantize_groups(matrix, rows, cols, group, 7);
}

std::vector<float> dequantize(const QuantisedMatrix& quantised) {
  std::vector<float> out(quantised.values.size());
  for (size_t at = 0; at < out.size(); ++at) {
    out[at] = static_cast<float>(quantised.values[at]) * quantised.scales[at / quantised.group];
  }
  return out;
}

std::vector<uint8_t> pack_int4(std::span<const int8_t> values) {
  assert(values.size() % 2 == 0);
  std::vector<uint8_t> packed(values.size() / 2);
  for (size_t i = 0; i < packed.size(); ++i) {
    const auto low = static_cast<uint8_t>(values[2 * i]) & 0x0fu;
    const auto high = static_cast<uint8_t>(values[2 * i + 1]) & 0x0fu;
    packed[i] = static_cast<uint8_t>(low | high << 4);
  }
  return packed;
}

}  // namespace simdev::gen
