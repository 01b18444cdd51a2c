// The capacity arithmetic against figures worked out by hand from the bring-up guide's
// formula, never from the program's own output.
#include "calbin/acceptance/capacity.hpp"

#include <gtest/gtest.h>

namespace calbin {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// Qwen3-30B-A3B: 48 layers, 4 KV heads of 128, context 40960, batch 1, BF16 K and V, two
// chips. 48 * 4 * 128 * 40960 * 1 * (2 + 2) bytes = 4026531840 = 3.75 GiB.
KvGeometry reference() { return KvGeometry{48, 4, 128, 40960, 1, Dtype::kBf16, Dtype::kBf16, 2}; }

TEST(Capacity, ReferenceKvIs3750MiBTotalAnd1875PerChip) {
  const auto kv = kv_bytes(reference());
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->total, uint64_t{4026531840});
  EXPECT_EQ(kv->total, 3 * kGiB + 3 * kGiB / 4);
  EXPECT_EQ(kv->per_chip, kv->total / 2);
  // One position of one sequence on one chip: 48 layers * 2 heads * 128 * (2 + 2) bytes.
  EXPECT_EQ(kv->per_token_per_chip, uint64_t{48 * 2 * 128 * 4});
}

TEST(Capacity, S8VCacheSavesAQuarterNotAHalf) {
  KvGeometry g = reference();
  g.v_dtype = Dtype::kInt8;
  const auto kv = kv_bytes(g);
  ASSERT_TRUE(kv);
  // K stays 2 bytes, V becomes 1, and each head at each position carries a 4-byte FP32 scale:
  // 48 * 4 * 40960 * (128 * 3 + 4) = 3051356160, just over 3/4 of the BF16 figure.
  EXPECT_EQ(kv->total, uint64_t{3051356160});
  EXPECT_EQ(kv->per_token_per_chip, uint64_t{48 * 2 * (128 * 3 + 4)});
}

TEST(Capacity, OddHeadCountReplicatesTheRemainder) {
  KvGeometry g{1, 3, 1, 1, 1, Dtype::kBf16, Dtype::kBf16, 2};
  const auto kv = kv_bytes(g);
  ASSERT_TRUE(kv);
  EXPECT_EQ(kv->total, 12u);
  EXPECT_EQ(kv->per_chip, 8u);  // two heads per chip, one of them shared
}

TEST(Capacity, OverflowIsReportedNotWrapped) {
  KvGeometry g = reference();
  g.context = uint64_t{1} << 62;
  EXPECT_FALSE(kv_bytes(g));
  g = reference();
  g.chips = 0;
  EXPECT_FALSE(kv_bytes(g));
}

TEST(Capacity, ParameterOverflowNamesTheWeightThatCrossedIt) {
  Manifest m;
  m.chips = 1;
  m.chip_mask = 1;
  m.llm.layers = m.llm.kv_heads = m.llm.head_dim = m.llm.context = m.llm.batch = 1;
  for (const char* name : {"embed", "lm_head"}) {
    WeightTensor w;
    w.name = name;
    w.bytes = uint64_t{1} << 63;
    w.shard.chip_mask = 1;
    m.weights.push_back(w);
  }
  const auto plan = plan_calbin(m, 16 * kGiB);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().field, "weights[1]");
  EXPECT_NE(plan.error().message.find("\"lm_head\""), std::string::npos) << plan.error().message;
  m.weights.pop_back();
  EXPECT_TRUE(plan_calbin(m, 16 * kGiB));
}

TEST(Capacity, LargestFitIsTheFloorOfTheRemainder) {
  EXPECT_EQ(largest_fit(100, 30, 7), 10u);
  EXPECT_EQ(largest_fit(100, 101, 7), 0u);
  EXPECT_EQ(largest_fit(100, 100, 7), 0u);
}

TEST(Capacity, PlanFiguresGivesHeadroomAndLimits) {
  // 10 GiB params + 1.875 GiB KV + 1 GiB workspace + 0.5 GiB I/O + 0.5 GiB guard on 16 GiB.
  const auto plan = plan_figures(reference(), 10 * kGiB, kGiB, kGiB / 2, kGiB / 2, 16 * kGiB);
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->chips.size(), 2u);
  const auto headroom = plan->chips[0].headroom();
  ASSERT_TRUE(headroom);
  EXPECT_EQ(*headroom, static_cast<int64_t>(16 * kGiB - 12 * kGiB - 15 * kGiB / 8));
  // 4 GiB left for KV at 48 KiB per position: 87381 positions.
  EXPECT_EQ(plan->max_context, (4 * kGiB) / (48 * 2 * 128 * 4));
  EXPECT_EQ(plan->max_batch, (4 * kGiB) / (uint64_t{48 * 2 * 128 * 4} * 40960));
}

TEST(Capacity, NegativeHeadroomWhenItDoesNotFit) {
  const auto plan = plan_figures(reference(), 15 * kGiB, kGiB, 0, 0, 16 * kGiB);
  ASSERT_TRUE(plan);
  const auto headroom = plan->chips[1].headroom();
  ASSERT_TRUE(headroom);
  EXPECT_LT(*headroom, 0);
  EXPECT_EQ(plan->max_context, 0u);
}

}  // namespace
}  // namespace calbin
