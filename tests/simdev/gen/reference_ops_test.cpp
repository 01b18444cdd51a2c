#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "simdev/gen/reference/reference_model.hpp"
#include "simdev/gen/rng.hpp"

namespace simdev::gen::ref {
namespace {

std::vector<float> random_vector(size_t size, uint64_t seed, double scale = 1.0) {
  NormalStream stream(seed);
  std::vector<float> values(size);
  for (float& value : values) {
    value = static_cast<float>(stream.next_normal() * scale);
  }
  return values;
}

double norm(const std::vector<float>& v) {
  double sum = 0.0;
  for (const float x : v) {
    sum += double{x} * x;
  }
  return std::sqrt(sum);
}

TEST(ReferenceOps, RmsnormGivesUnitRms) {
  const std::vector<float> x = random_vector(128, 1, 7.0);
  const std::vector<float> ones(128, 1.0f);
  std::vector<float> out(128);
  rmsnorm(x, ones, 1e-6, out);
  EXPECT_NEAR(norm(out) / std::sqrt(128.0), 1.0, 1e-5);
}

TEST(ReferenceOps, RmsnormAppliesTheWeight) {
  const std::vector<float> x = random_vector(16, 2);
  std::vector<float> ones(16, 1.0f), twos(16, 2.0f), a(16), b(16);
  rmsnorm(x, ones, 1e-6, a);
  rmsnorm(x, twos, 1e-6, b);
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_FLOAT_EQ(b[i], 2.0f * a[i]);
  }
}

TEST(ReferenceOps, RopePreservesNorms) {
  for (const int64_t position : {1, 17, 4095, 40000}) {
    std::vector<float> head = random_vector(32, 3);
    const double before = norm(head);
    rope(head, position, 1e6);
    EXPECT_NEAR(norm(head), before, 1e-5 * before) << position;
  }
}

TEST(ReferenceOps, RopeAtPositionZeroIsIdentity) {
  const std::vector<float> original = random_vector(32, 4);
  std::vector<float> head = original;
  rope(head, 0, 1e6);
  EXPECT_EQ(head, original);
}

TEST(ReferenceOps, RopeRotatesTheFirstPairByThePosition) {
  std::vector<float> head(8, 0.0f);
  head[0] = 1.0f;  // pair (0, 4) has frequency theta^0 = 1
  rope(head, 1, 10000.0);
  EXPECT_NEAR(head[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(head[4], std::sin(1.0), 1e-6);
}

// One query of one head over slots [0, slots).
void attend_one(const std::vector<float>& q, const KvHead& kv, size_t slots,
                std::vector<float>& out) {
  attend_rows(q, 1, 1, &kv, 1, slots - 1, softmax_after_sum, out);
}

TEST(ReferenceOps, AttentionOverOneSlotReturnsItsValue) {
  KvHead kv(32, 8);
  const std::vector<float> key = random_vector(32, 5), value = random_vector(32, 6);
  kv.store(0, key, value);
  std::vector<float> out(32);
  attend_one(random_vector(32, 7, 10.0), kv, 1, out);
  for (size_t d = 0; d < 32; ++d) {
    EXPECT_FLOAT_EQ(out[d], value[d]);
  }
}

TEST(ReferenceOps, AttentionWithEqualKeysAveragesValues) {
  KvHead kv(4, 8);
  const std::vector<float> key = {1, 2, 3, 4};
  kv.store(0, key, std::vector<float>{1, 0, 0, 0});
  kv.store(1, key, std::vector<float>{0, 1, 0, 0});
  kv.store(2, key, std::vector<float>{0, 0, 1, 3});
  std::vector<float> out(4);
  attend_one(std::vector<float>{0.5f, -1, 2, 0}, kv, 3, out);
  EXPECT_NEAR(out[0], 1.0 / 3, 1e-6);
  EXPECT_NEAR(out[1], 1.0 / 3, 1e-6);
  EXPECT_NEAR(out[2], 1.0 / 3, 1e-6);
  EXPECT_NEAR(out[3], 1.0, 1e-6);
}

TEST(ReferenceOps, AttentionIgnoresSlotsBeyondTheCount) {
  KvHead kv(4, 8);
  kv.store(0, std::vector<float>{1, 0, 0, 0}, std::vector<float>{1, 1, 1, 1});
  kv.store(1, std::vector<float>{9, 9, 9, 9}, std::vector<float>{-5, -5, -5, -5});
  std::vector<float> out(4);
  attend_one(std::vector<float>{1, 1, 1, 1}, kv, 1, out);
  EXPECT_EQ(out, (std::vector<float>{1, 1, 1, 1}));
}

// attend_rows blocks queries of one KV head together and runs its loops on vectors; the
// result must be the plain loops' bit for bit (the order MODEL.md gives the device), on head
// sizes that leave vector tails, GQA groups of 1-3, token counts that leave a short block and
// slot counts on both sides of a vector's width.
TEST(ReferenceOps, BlockedAttentionIsThePlainLoopsBitForBit) {
  struct Shape {
    size_t head_dim, kv_heads, group, count, first_slot;
  };
  for (const Shape s : {Shape{4, 1, 1, 1, 0}, Shape{24, 2, 3, 5, 13}, Shape{80, 1, 2, 9, 70},
                        Shape{128, 2, 2, 3, 61}, Shape{64, 3, 1, 7, 0}}) {
    const size_t q_heads = s.kv_heads * s.group, d = s.head_dim;
    const size_t capacity = s.first_slot + s.count + 5;
    std::vector<KvHead> kv;
    for (size_t g = 0; g < s.kv_heads; ++g) {
      kv.emplace_back(d, capacity);
      for (size_t slot = 0; slot < s.first_slot + s.count; ++slot) {
        kv[g].store(slot, random_vector(d, 100 + g * 1000 + slot, 2.0),
                    random_vector(d, 500 + g * 1000 + slot));
      }
    }
    const std::vector<float> q = random_vector(s.count * q_heads * d, 9, 3.0);
    std::vector<float> got(q.size());
    attend_rows(q, s.count, q_heads, kv.data(), s.kv_heads, s.first_slot, softmax_after_sum, got);
    for (size_t t = 0; t < s.count; ++t) {
      for (size_t h = 0; h < q_heads; ++h) {
        const KvHead& head = kv[h / s.group];
        const size_t slots = s.first_slot + t + 1;
        const float* qh = q.data() + (t * q_heads + h) * d;
        std::vector<float> scores(slots, 0.0f);
        for (size_t j = 0; j < slots; ++j) {
          for (size_t e = 0; e < d; ++e) scores[j] += qh[e] * head.keys_t[e * capacity + j];
        }
        const float factor = softmax_after_sum(scores, d);
        for (size_t e = 0; e < d; ++e) {
          float acc = 0.0f;
          for (size_t j = 0; j < slots; ++j) acc += scores[j] * head.values[j * d + e];
          const float want = acc * factor;
          const float have = got[(t * q_heads + h) * d + e];
          ASSERT_EQ(std::bit_cast<uint32_t>(have), std::bit_cast<uint32_t>(want))
              << "head_dim " << d << " group " << s.group << " token " << t << " head " << h
              << " dim " << e;
        }
      }
    }
  }
}

// MODEL.md, "Mixture of experts", worked by hand: logits {1, 3, 3, 0.5}, top-2. Experts 1 and
// 2 tie at 3, both are taken, the lower id first; their softmax shares are 1 / S with
// S = e^-2 + 1 + 1 + e^-2.5, and renormalised over the two they are 1/2 each.
TEST(ReferenceOps, RouteTakesTheLargestLogitsLowerIdFirst) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 0.5f};
  const double sum = std::exp(-2.0) + 2.0 + std::exp(-2.5);
  Route r = route(logits, 2, false);
  std::vector<uint32_t> ids = r.experts;
  std::vector<float> weights = r.weights;
  EXPECT_EQ(ids, (std::vector<uint32_t>{1, 2}));
  EXPECT_FLOAT_EQ(weights[0], static_cast<float>(1.0 / sum));
  EXPECT_FLOAT_EQ(weights[1], static_cast<float>(1.0 / sum));
  r = route(logits, 2, true);
  ids = r.experts;
  weights = r.weights;
  EXPECT_EQ(ids, (std::vector<uint32_t>{1, 2}));
  EXPECT_FLOAT_EQ(weights[0], 0.5f);
  EXPECT_FLOAT_EQ(weights[1], 0.5f);
  // A clear winner: top-1 of {0, 2, -1} is expert 1 with weight 1 when renormalised.
  const std::vector<float> three = {0.0f, 2.0f, -1.0f};
  r = route(three, 1, true);
  ids = r.experts;
  weights = r.weights;
  EXPECT_EQ(ids, (std::vector<uint32_t>{1}));
  EXPECT_FLOAT_EQ(weights[0], 1.0f);
}

}  // namespace
}  // namespace simdev::gen::ref
