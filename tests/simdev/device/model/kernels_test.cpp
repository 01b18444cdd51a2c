// The device kernels against straightforward loops written from the MODEL.md formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "simdev/device/model/kernels.hpp"

namespace simdev::kernels {
namespace {

// BF16 by truncation, and back: the tests' own conversions (any BF16 values will do).
uint16_t calbin_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::vector<float> random_floats(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(count);
  for (float& v : values) {
    v = dist(rng);
  }
  return values;
}

TEST(Kernels, RmsnormMatchesFormula) {
  const size_t rows = 3, dim = 40;
  const auto x = random_floats(rows * dim, 1);
  const auto w = random_floats(dim, 2);
  std::vector<float> out(rows * dim);
  rmsnorm(x.data(), w.data(), out.data(), rows, dim, 1e-6f);
  for (size_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (size_t i = 0; i < dim; ++i) {
      ss += double(x[r * dim + i]) * x[r * dim + i];
    }
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
    for (size_t i = 0; i < dim; ++i) {
      EXPECT_NEAR(out[r * dim + i], x[r * dim + i] * inv * w[i], 1e-5);
    }
  }
}

TEST(Kernels, QuantizeIsSymmetricPerRow) {
  const std::vector<float> x = {0.5f, -1.0f, 0.25f, 0.0f, 0.0f, 0.0f};
  std::vector<int8_t> q(6);
  std::vector<float> scales(2);
  quantize_rows(x.data(), 2, 3, q.data(), scales.data());
  EXPECT_FLOAT_EQ(scales[0], 1.0f / 127.0f);
  EXPECT_EQ(q[0], 64);  // 63.5 rounds to even
  EXPECT_EQ(q[1], -127);
  EXPECT_EQ(q[2], 32);
  EXPECT_EQ(scales[1], 0.0f);
  EXPECT_EQ(q[3], 0);
}

// MODEL.md's w4af16 order: exact products summed per group in index order, then the groups'
// scaled sums in group order, all FP32. The loop below follows the formula, not the kernel.
TEST(Kernels, W4af16MatmulSumsGroupsThenScales) {
  const size_t rows = 3, in = 48, out = 5, group = 16;
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> dist(-8, 7);
  std::vector<int8_t> w(out * in);
  for (auto& v : w) v = static_cast<int8_t>(dist(rng));
  const auto x = random_floats(rows * in, 10);
  const auto scales = random_floats(out * (in / group), 11, 0.1f);
  std::vector<float> result(rows * out);
  w4af16_matmul(x.data(), rows, in, w.data(), scales.data(), group, out, result.data());
  for (size_t r = 0; r < rows; ++r) {
    for (size_t o = 0; o < out; ++o) {
      float expected = 0.0f;
      double exact = 0.0;
      for (size_t g = 0; g < in / group; ++g) {
        float sum = 0.0f;
        for (size_t i = 0; i < group; ++i) {
          const size_t at = g * group + i;
          sum += float(w[o * in + at]) * x[r * in + at];
          exact += double(w[o * in + at]) * x[r * in + at] * scales[o * (in / group) + g];
        }
        expected += sum * scales[o * (in / group) + g];
      }
      EXPECT_EQ(result[r * out + o], expected) << r << "," << o;
      EXPECT_NEAR(result[r * out + o], exact, 1e-5) << r << "," << o;
    }
  }
}

// Every instruction set this build and CPU run, the reference loops first.
std::vector<Isa> isas_here() {
  std::vector<Isa> isas;
  for (const Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512_vnni}) {
    if (supported(isa)) isas.push_back(isa);
  }
  return isas;
}

struct Int8Case {
  Int8Case(size_t rows_, size_t in_, size_t out_, uint32_t seed) : rows(rows_), in(in_), out(out_) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> dist(-128, 127);
    a.resize(rows * in);
    w.resize(out * in);
    for (auto& v : a) v = static_cast<int8_t>(dist(rng));
    for (auto& v : w) v = static_cast<int8_t>(dist(rng));
    a_scales = random_floats(rows, seed + 1);
    w_scales = random_floats(out, seed + 2);
    sums.resize(out);
    int8_row_sums(w.data(), out, in, sums.data());
  }
  Int8Weights weights() const { return {w.data(), w_scales.data(), sums.data(), out, in}; }
  size_t rows, in, out;
  std::vector<int8_t> a, w;
  std::vector<float> a_scales, w_scales;
  std::vector<int32_t> sums;
};

TEST(Kernels, Int8MatmulMatchesNaiveLoop) {
  const Int8Case m(5, 67, 9, 3);
  for (const Isa isa : isas_here()) {
    std::vector<float> result(m.rows * m.out);
    int8_matmul(m.a.data(), m.a_scales.data(), m.rows, m.weights(), result.data(), m.out, isa);
    for (size_t r = 0; r < m.rows; ++r) {
      for (size_t o = 0; o < m.out; ++o) {
        int64_t acc = 0;
        for (size_t i = 0; i < m.in; ++i) {
          acc += int64_t{m.a[r * m.in + i]} * m.w[o * m.in + i];
        }
        EXPECT_FLOAT_EQ(result[r * m.out + o], float(acc) * m.a_scales[r] * m.w_scales[o])
            << to_string(isa) << " " << r << "," << o;
      }
    }
  }
}

// The AVX2 and VNNI kernels give the reference loops' bits on every shape around their blocks
// (16 and 64 inputs, tiles of 1, 2 and 4 rows and 4 and 8 outputs), at the extremes of both
// operands (-128 and 127, where the VNNI kernel's +128 offset and a saturating multiply would
// go wrong), and written into a wider output row, as a worker's slice is.
TEST(Kernels, Int8MatmulIsTheReferenceBitForBitOnEveryInstructionSet) {
  uint32_t seed = 11;
  for (const size_t in : {1, 7, 15, 16, 17, 63, 64, 65, 127, 1023, 1024, 1025, 3072, 4100}) {
    for (const size_t rows : {1, 2, 3, 4, 5, 8, 9, 64}) {
      for (const size_t out : {1, 3, 4, 5, 8, 9, 33}) {
        Int8Case m(rows, in, out, ++seed);
        if (seed % 3 == 0) {
          for (auto& v : m.a) v = static_cast<int8_t>(v < 0 ? -128 : 127);
          for (auto& v : m.w) v = static_cast<int8_t>(v < 0 ? -128 : 127);
          int8_row_sums(m.w.data(), m.out, m.in, m.sums.data());
        }
        const size_t stride = out + 3;
        std::vector<float> reference(rows * stride, -1.0f);
        int8_matmul(m.a.data(), m.a_scales.data(), rows, m.weights(), reference.data(), stride,
                    Isa::scalar);
        for (const Isa isa : isas_here()) {
          std::vector<float> fast(rows * stride, -1.0f);
          int8_matmul(m.a.data(), m.a_scales.data(), rows, m.weights(), fast.data(), stride, isa);
          ASSERT_EQ(0, std::memcmp(fast.data(), reference.data(), fast.size() * sizeof(float)))
              << to_string(isa) << ": in " << in << ", rows " << rows << ", out " << out;
        }
      }
    }
  }
}

// Two workers' slices of the weight rows fill the same output as one call.
TEST(Kernels, Int8MatmulSlicesMakeTheWhole) {
  const Int8Case m(6, 200, 37, 5);
  for (const Isa isa : isas_here()) {
    std::vector<float> whole(m.rows * m.out), parts(m.rows * m.out);
    int8_matmul(m.a.data(), m.a_scales.data(), m.rows, m.weights(), whole.data(), m.out, isa);
    int8_matmul(m.a.data(), m.a_scales.data(), m.rows, m.weights().slice(0, 20), parts.data(),
                m.out, isa);
    int8_matmul(m.a.data(), m.a_scales.data(), m.rows, m.weights().slice(20, 17), parts.data() + 20,
                m.out, isa);
    EXPECT_EQ(whole, parts) << to_string(isa);
  }
}

// Values whose sum depends on the order of the additions: magnitudes from 2^-20 to 2^20, both
// signs, a few zeros of either sign, and now and then an infinity or a NaN.
std::vector<float> order_sensitive(size_t count, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> exponent(-20, 20), kind(0, 99);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::vector<float> values(count);
  for (float& v : values) {
    const int k = kind(rng);
    v = std::ldexp(mantissa(rng), exponent(rng)) * (k % 2 == 0 ? 1.0f : -1.0f);
    if (k < 3) v = k == 0 ? 0.0f : -0.0f;
    if (specials && k == 98) v = INFINITY;
    if (specials && k == 99) v = NAN;
  }
  return values;
}

// Equal bits, except that any two NaNs are equal: which NaN operand's payload a product keeps
// depends on the operand order the compiler picks, which nothing in the contract fixes.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return a.size() == b.size();
}

// The FP32 matvec over FP32 and BF16 weights, on every instruction set, is dot_f32's lane order
// bit for bit, tails of every length included. The negative control: one sum in index order
// over the same data differs, so the comparison can see an order that is not the contract's.
TEST(Kernels, MatvecKeepsTheContractLaneOrderOnEveryInstructionSet) {
  bool order_visible = false;
  uint32_t seed = 40;
  for (const size_t in : {1, 2, 15, 16, 17, 31, 33, 100, 1023, 1024, 1025}) {
    for (const bool specials : {false, true}) {
      const size_t out = 7;
      const auto x = order_sensitive(in, ++seed, specials);
      const auto w = order_sensitive(out * in, ++seed, specials);
      std::vector<uint16_t> w16(w.size());
      std::transform(w.begin(), w.end(), w16.begin(), calbin_bf16);
      std::vector<float> reference(out), reference16(out);
      for (size_t o = 0; o < out; ++o) {
        reference[o] = dot_f32(x.data(), &w[o * in], in);
        std::vector<float> widened(in);
        for (size_t i = 0; i < in; ++i) widened[i] = from_bf16(w16[o * in + i]);
        reference16[o] = dot_f32(x.data(), widened.data(), in);
        float serial = 0.0f;
        for (size_t i = 0; i < in; ++i) serial += x[i] * w[o * in + i];
        order_visible = order_visible || std::memcmp(&serial, &reference[o], sizeof serial) != 0;
      }
      for (const Isa isa : isas_here()) {
        std::vector<float> got(out), got16(out);
        f32_matvec(x.data(), in, w.data(), out, got.data(), isa);
        bf16_matvec(x.data(), in, w16.data(), out, got16.data(), isa);
        ASSERT_TRUE(same_bits(got, reference)) << to_string(isa) << ": fp32, in " << in;
        ASSERT_TRUE(same_bits(got16, reference16)) << to_string(isa) << ": bf16, in " << in;
      }
    }
  }
  EXPECT_TRUE(order_visible);
}

TEST(Kernels, RopeRotatesNeoxPairs) {
  const size_t dim = 8;
  auto head = random_floats(dim, 6);
  const auto original = head;
  const int64_t position = 1234;
  const double theta = 1e6;
  rope_neox(head.data(), dim, position, theta);
  for (size_t i = 0; i < dim / 2; ++i) {
    const double angle = double(position) * std::pow(theta, -2.0 * double(i) / double(dim));
    const double x0 = original[i], x1 = original[i + dim / 2];
    EXPECT_NEAR(head[i], x0 * std::cos(angle) - x1 * std::sin(angle), 1e-5);
    EXPECT_NEAR(head[i + dim / 2], x0 * std::sin(angle) + x1 * std::cos(angle), 1e-5);
  }
  std::vector<float> zero_pos = original;
  rope_neox(zero_pos.data(), dim, 0, theta);
  EXPECT_EQ(zero_pos, original);
}

TEST(Kernels, AttendMatchesNaiveSoftmax) {
  const size_t dim = 32, slots = 77, stride = 80;
  const auto q = random_floats(dim, 7);
  const auto k = random_floats(slots * dim, 8);  // [slot][dim]
  const auto v = random_floats(slots * dim, 9);
  std::vector<float> kt(dim * stride, 0.0f);
  for (size_t s = 0; s < slots; ++s) {
    for (size_t d = 0; d < dim; ++d) {
      kt[d * stride + s] = k[s * dim + d];
    }
  }
  std::vector<float> scores(slots), out(dim);
  attend(q.data(), kt.data(), stride, v.data(), slots, dim, scores.data(), out.data());
  std::vector<double> p(slots);
  double max_score = -1e30, sum = 0;
  for (size_t s = 0; s < slots; ++s) {
    double dot = 0;
    for (size_t d = 0; d < dim; ++d) {
      dot += double(q[d]) * k[s * dim + d];
    }
    p[s] = dot / std::sqrt(double(dim));
    max_score = std::max(max_score, p[s]);
  }
  for (double& x : p) {
    x = std::exp(x - max_score);
    sum += x;
  }
  for (size_t d = 0; d < dim; ++d) {
    double expected = 0;
    for (size_t s = 0; s < slots; ++s) {
      expected += p[s] / sum * v[s * dim + d];
    }
    EXPECT_NEAR(out[d], expected, 1e-5) << d;
  }
}

// The device's numerics are defined by the order of its float additions: each score adds
// its dimensions in order, each output its slots in order. attend() folds several per pass
// for speed; the fold must leave every bit as the one-at-a-time order gives it, or recorded
// runs and calibrated gates would silently shift. Shapes cover the folded remainders.
TEST(Kernels, AttendKeepsTheOneAtATimeAdditionOrderBitForBit) {
  for (const size_t dim : {1u, 3u, 4u, 6u, 32u, 128u}) {
    for (const size_t slots : {1u, 2u, 5u, 8u, 77u, 258u}) {
      const size_t stride = slots + 3;
      const auto q = random_floats(dim, static_cast<uint32_t>(11 + dim));
      const auto kt = random_floats(dim * stride, static_cast<uint32_t>(12 + slots));
      const auto v = random_floats(slots * dim, static_cast<uint32_t>(13 + dim * slots));
      std::vector<float> scores(slots), out(dim);
      attend(q.data(), kt.data(), stride, v.data(), slots, dim, scores.data(), out.data());

      std::vector<float> expected_scores(slots, 0.0f);
      for (size_t d = 0; d < dim; ++d) {
        for (size_t s = 0; s < slots; ++s) expected_scores[s] += q[d] * kt[d * stride + s];
      }
      // calbin/MODEL.md: the scale is 1 / sqrt(D) computed in double, rounded once.
      const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
      float max_score = -INFINITY;
      for (float& x : expected_scores) {
        x *= scale;
        max_score = std::max(max_score, x);
      }
      double sum = 0.0;
      for (float& x : expected_scores) {
        x = std::exp(x - max_score);
        sum += x;
      }
      const float inv_sum = static_cast<float>(1.0 / sum);
      std::vector<float> expected(dim, 0.0f);
      for (size_t s = 0; s < slots; ++s) {
        const float p = expected_scores[s] * inv_sum;
        for (size_t d = 0; d < dim; ++d) expected[d] += p * v[s * dim + d];
      }
      ASSERT_EQ(std::memcmp(scores.data(), expected_scores.data(), slots * sizeof(float)), 0)
          << "scores differ, dim " << dim << " slots " << slots;
      ASSERT_EQ(std::memcmp(out.data(), expected.data(), dim * sizeof(float)), 0)
          << "output differs, dim " << dim << " slots " << slots;
    }
  }
}

TEST(Kernels, SiluMulAndMatvec) {
  const std::vector<float> gate = {-2.0f, 0.0f, 3.0f};
  const std::vector<float> up = {1.0f, 5.0f, 0.5f};
  std::vector<float> out(3);
  silu_mul(gate.data(), up.data(), out.data(), 3);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(out[i], gate[i] / (1 + std::exp(-gate[i])) * up[i], 1e-6);
  }
  const std::vector<float> x = {1, 2, 3};
  const std::vector<float> w = {1, 0, 0, 0, 1, 1};
  std::vector<float> y(2);
  f32_matvec(x.data(), 3, w.data(), 2, y.data());
  EXPECT_EQ(y, (std::vector<float>{1, 5}));
}

// MODEL.md, "Mixture of experts", worked by hand: logits {1, 3, 3, 0.5}, top-2. Experts 1 and
// 2 tie at 3, both are taken, the lower id first; their softmax shares are 1 / S with
// S = e^-2 + 1 + 1 + e^-2.5, and renormalised over the two they are 1/2 each.
TEST(Kernels, RouteTakesTheLargestLogitsLowerIdFirst) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.5f};
  const double sum = std::exp(-2.0) + 2.0 + std::exp(-2.5);
  std::vector<uint32_t> ids(2);
  std::vector<float> weights(2);
  route_top_k(logits.data(), 4, 2, false, ids.data(), weights.data());
  EXPECT_EQ(ids, (std::vector<uint32_t>{1, 2}));
  EXPECT_FLOAT_EQ(weights[0], static_cast<float>(1.0 / sum));
  EXPECT_FLOAT_EQ(weights[1], static_cast<float>(1.0 / sum));
  route_top_k(logits.data(), 4, 2, true, ids.data(), weights.data());
  EXPECT_EQ(ids, (std::vector<uint32_t>{1, 2}));
  EXPECT_FLOAT_EQ(weights[0], 0.5f);
  EXPECT_FLOAT_EQ(weights[1], 0.5f);
  // A clear winner: top-1 of {0, 2, -1} is expert 1 with weight 1 when renormalised.
  const std::vector<float> three = {0.0f, 2.0f, -1.0f};
  ids.resize(1);
  weights.resize(1);
  route_top_k(three.data(), 3, 1, true, ids.data(), weights.data());
  EXPECT_EQ(ids, (std::vector<uint32_t>{1}));
  EXPECT_FLOAT_EQ(weights[0], 1.0f);
}

}  // namespace
}  // namespace simdev::kernels
