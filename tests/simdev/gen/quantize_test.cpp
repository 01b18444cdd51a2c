#include "simdev/gen/weights/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>

#include "simdev/gen/rng.hpp"

namespace simdev::gen {
namespace {

std::vector<float> random_matrix(size_t rows, size_t cols, uint64_t seed) {
  NormalStream stream(seed);
  std::vector<float> values(rows * cols);
  for (float& value : values) {
    value = static_cast<float>(stream.next_normal() * 0.3);
  }
  return values;
}

TEST(Quantize, RoundTripErrorIsAtMostHalfAScale) {
  const size_t rows = 37, cols = 53;
  const std::vector<float> w = random_matrix(rows, cols, 7);
  const QuantisedMatrix q = quantize_rows(w, rows, cols);
  const std::vector<float> back = dequantize(q);
  for (size_t r = 0; r < rows; ++r) {
    ASSERT_GT(q.scales[r], 0.0f);
    for (size_t c = 0; c < cols; ++c) {
      const size_t at = r * cols + c;
      EXPECT_LE(std::fabs(back[at] - w[at]), q.scales[r] * 0.5f * 1.0001f) << r << "," << c;
    }
  }
}

TEST(Quantize, RowMaximumMapsTo127AndStaysInRange) {
  const std::vector<float> w = {0.5f, -1.0f, 0.25f, 2.0f, 1.0f, -0.5f};
  const QuantisedMatrix q = quantize_rows(w, 2, 3);
  EXPECT_EQ(q.values[1], -127);
  EXPECT_EQ(q.values[3], 127);
  EXPECT_FLOAT_EQ(q.scales[0], 1.0f / 127.0f);
  EXPECT_FLOAT_EQ(q.scales[1], 2.0f / 127.0f);
  for (const int8_t v : q.values) {
    EXPECT_GE(v, -127);
  }
}

TEST(Quantize, ZeroRowHasUnitScaleAndZeros) {
  const std::vector<float> w(8, 0.0f);
  const QuantisedMatrix q = quantize_rows(w, 2, 4);
  EXPECT_EQ(q.scales[0], 1.0f);
  for (const float v : dequantize(q)) {
    EXPECT_EQ(v, 0.0f);
  }
}

TEST(Quantize, Int4GroupsHaveTheirOwnScaleAndStayWithinSeven) {
  const size_t rows = 6, cols = 64, group = 16;
  const std::vector<float> w = random_matrix(rows, cols, 11);
  const QuantisedMatrix q = quantize_int4_groups(w, rows, cols, group);
  ASSERT_EQ(q.scales.size(), rows * cols / group);
  const std::vector<float> back = dequantize(q);
  for (size_t g = 0; g < q.scales.size(); ++g) {
    float max_abs = 0.0f;
    int max_q = 0;
    for (size_t i = g * group; i < (g + 1) * group; ++i) {
      max_abs = std::max(max_abs, std::fabs(w[i]));
      max_q = std::max(max_q, std::abs(int{q.values[i]}));
      EXPECT_LE(std::fabs(back[i] - w[i]), q.scales[g] * 0.5f * 1.0001f) << i;
    }
    EXPECT_FLOAT_EQ(q.scales[g], max_abs / 7.0f) << g;
    EXPECT_EQ(max_q, 7) << g;  // the group's largest weight takes the full range
  }
}

TEST(Quantize, PackInt4PutsTheEvenElementInTheLowNibble) {
  const std::vector<int8_t> values = {1, -1, -8, 7, 0, -2};
  // 1 | 0xF << 4, 0x8 | 7 << 4, 0 | 0xE << 4: two's complement nibbles.
  EXPECT_EQ(pack_int4(values), (std::vector<uint8_t>{0xF1, 0x78, 0xE0}));
}

TEST(Rng, NormalStreamIsDeterministicAndRoughlyStandard) {
  NormalStream a(42), b(42);
  double sum = 0.0, sum_squares = 0.0;
  const int count = 20000;
  for (int i = 0; i < count; ++i) {
    const double x = a.next_normal();
    ASSERT_EQ(x, b.next_normal());
    sum += x;
    sum_squares += x * x;
  }
  EXPECT_NEAR(sum / count, 0.0, 0.03);
  EXPECT_NEAR(sum_squares / count, 1.0, 0.05);
  EXPECT_NE(derive_seed(1, "a"), derive_seed(1, "b"));
  EXPECT_NE(derive_seed(1, "a"), derive_seed(2, "a"));
}

}  // namespace
}  // namespace simdev::gen
