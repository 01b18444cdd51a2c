// A decode that ranks on the device (calrt.h, CALRT_ROLE_TOP_IDS): the ABI promises checked on
// its rows, the contract gate on its values and on what it leaves out, and the FP32 figures
// over its candidates. Expected values are worked out by hand from the rows below.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "runner/core/decode_row.hpp"
#include "runner/core/golden_compare.hpp"

namespace runner {
namespace {

DecodeRow ranked(std::vector<int32_t> ids, std::vector<float> values) {
  return DecodeRow{std::move(values), std::move(ids), std::nullopt};
}

bool says(const std::string& text, const std::string& words) {
  return text.find(words) != std::string::npos;
}

TEST(RankedRow, TheAbisPromisesAreChecked) {
  EXPECT_EQ(ranked_row_defect(ranked({3, 1, 2}, {5.0f, 4.0f, 4.0f}), 4), "");
  EXPECT_TRUE(says(ranked_row_defect(ranked({3, 4}, {5.0f, 4.0f}), 4), "id 4, outside"));
  EXPECT_TRUE(says(ranked_row_defect(ranked({3, -1}, {5.0f, 4.0f}), 4), "id -1, outside"));
  EXPECT_TRUE(says(ranked_row_defect(ranked({3, 3}, {5.0f, 4.0f}), 4), "repeats id 3"));
  EXPECT_TRUE(says(ranked_row_defect(ranked({1, 3}, {4.0f, 5.0f}), 4), "out of order"));
  // Equal values go in increasing id order.
  EXPECT_TRUE(says(ranked_row_defect(ranked({2, 1}, {4.0f, 4.0f}), 4), "out of order"));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(ranked_row_defect(ranked({0, 1}, {4.0f, nan}), 4), "") << "NaN ranks last";
  EXPECT_TRUE(says(ranked_row_defect(ranked({1, 0}, {nan, 4.0f}), 4), "out of order"));
}

TEST(RankedRow, TheContractRowRankedAsTheDeviceRanks) {
  const std::vector<float> full = {1.0f, 3.0f, 3.0f, -2.0f, 2.0f};
  const DecodeRow row = rank_like_device(full, 3);
  EXPECT_EQ(row.ids, (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(row.logits, (std::vector<float>{3.0f, 3.0f, 2.0f}));
  EXPECT_EQ(row.best(), 1);
  const DecodeRow whole{full, {}, std::nullopt};
  EXPECT_EQ(whole.best(), 1) << "a full row's best is its argmax, lowest id";
}

// max |contract| 10: one ULP is 0.0625.
TEST(RankedContract, ValuesAreJudgedAtTheirIds) {
  const std::vector<float> contract = {10.0f, 2.0f, 9.0f, 1.0f};
  ContractComparison c = compare_contract(ranked({0, 2}, {10.0f, 9.0f}), contract);
  EXPECT_EQ(c.ulps, 0.0);
  EXPECT_EQ(c.differing, 0u);
  c = compare_contract(ranked({0, 2}, {10.0f, 9.125f}), contract);
  EXPECT_DOUBLE_EQ(c.ulps, 2.0);
  EXPECT_DOUBLE_EQ(c.mean_ulps, 1.0);
  EXPECT_EQ(c.worst_id, 2);
  EXPECT_FALSE(c.missing);
  EXPECT_EQ(c.worst(), "logit 2: device 9.125 vs contract 9");
}

TEST(RankedContract, ATokenLeftOutCountsByHowFarAboveTheLastCandidate) {
  const std::vector<float> contract = {10.0f, 2.0f, 9.0f, 1.0f};
  // Token 2 (9.0) left out in favour of token 1 (2.0): 7.0 above the last = 112 ULPs.
  ContractComparison c = compare_contract(ranked({0, 1}, {10.0f, 2.0f}), contract);
  EXPECT_DOUBLE_EQ(c.ulps, 112.0);
  EXPECT_TRUE(c.missing);
  EXPECT_EQ(c.worst_id, 2);
  EXPECT_TRUE(says(c.worst(), "logit 2: left out of the device's ranked candidates"));
  // A near-tie at the last place within the gate trades places: 0.0625 above is 1 ULP.
  const std::vector<float> tie = {10.0f, 9.0f, 9.0625f};
  c = compare_contract(ranked({0, 1}, {10.0f, 9.0f}), tie);
  EXPECT_DOUBLE_EQ(c.ulps, 1.0);
  EXPECT_TRUE(c.missing);
}

// A device that inflates its last candidate to hide the tokens it dropped: the bar is the
// contract's value at that id when lower, so tokens 1 (9.0) and 3 (8.0) are 7.0 and 6.0 above
// it, not 0.5 and -0.5.
TEST(RankedContract, AnInflatedLastCandidateHidesNoDrop) {
  const std::vector<float> contract = {10.0f, 9.0f, 2.0f, 8.0f};
  const ContractComparison c = compare_contract(ranked({0, 2}, {10.0f, 8.5f}), contract);
  EXPECT_DOUBLE_EQ(c.ulps, 112.0);
  EXPECT_TRUE(c.missing);
  EXPECT_EQ(c.worst_id, 1);
}

TEST(RankedContract, ANanCandidateIsTheWorst) {
  const std::vector<float> contract = {10.0f, 2.0f, 1.0f};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const ContractComparison c = compare_contract(ranked({0, 1}, {10.0f, nan}), contract);
  EXPECT_TRUE(std::isinf(c.ulps));
  EXPECT_EQ(c.worst_id, 1);
}

TEST(RankedContract, AnIdOutsideTheRowIsTheWorst) {
  const std::vector<float> contract = {10.0f, 2.0f};
  const ContractComparison c = compare_contract(ranked({0, 7}, {10.0f, 2.0f}), contract);
  EXPECT_TRUE(std::isinf(c.ulps));
  EXPECT_EQ(c.worst_id, 7);
}

// A golden case of one decode step over a vocabulary of 6, golden top 3 = ids 5, 1, 0.
calbin::GoldenCase one_step(bool full_rows) {
  calbin::GoldenCase g;
  g.decode_steps = 1;
  g.greedy = {5, 5};
  g.top_ids = {5, 1, 0};
  g.top_logits = {8.0f, 6.0f, 4.0f};
  if (full_rows) g.decode_logits = {4.0f, 6.0f, 1.0f, 2.0f, 3.0f, 8.0f};
  return g;
}

TEST(RankedDecodeComparison, OverTheCandidatesAgainstTheGoldensFullRow) {
  const calbin::GoldenCase g = one_step(true);
  // The device swapped ids 1 and 0 at the second place and gave 0 a wrong value.
  const Comparison c = compare_decode(ranked({5, 0, 1}, {8.0f, 6.5f, 6.0f}), g, 0, 3);
  EXPECT_EQ(c.argmax, 5);
  EXPECT_EQ(c.expected_argmax, 5);
  EXPECT_DOUBLE_EQ(c.top_k_overlap, 1.0) << "the same three ids";
  EXPECT_DOUBLE_EQ(c.max_abs_error, 2.5) << "id 0: 6.5 against 4";
  EXPECT_DOUBLE_EQ(c.golden_margin, 2.0);
  EXPECT_LT(c.cosine, 1.0);
}

TEST(RankedDecodeComparison, WithoutFullRowsOverTheIdsBothListsHold) {
  const calbin::GoldenCase g = one_step(false);
  // Id 3 is not in the golden's top 3: only 5 and 1 are compared, both exact.
  const Comparison c = compare_decode(ranked({5, 1, 3}, {8.0f, 6.0f, 5.0f}), g, 0, 3);
  EXPECT_DOUBLE_EQ(c.cosine, 1.0);
  EXPECT_DOUBLE_EQ(c.max_abs_error, 0.0);
  EXPECT_NEAR(c.top_k_overlap, 2.0 / 3.0, 1e-12);
  // With fewer candidates than the golden's top k, each must be among the golden's top k:
  // golden's third (id 0) swapped in at the second place by a near-tie is no miss, id 3 is.
  const Comparison two = compare_decode(ranked({5, 0}, {8.0f, 5.0f}), g, 0, 3);
  EXPECT_DOUBLE_EQ(two.top_k_overlap, 1.0);
  const Comparison outside = compare_decode(ranked({5, 3}, {8.0f, 5.0f}), g, 0, 3);
  EXPECT_DOUBLE_EQ(outside.top_k_overlap, 0.5);
  const Comparison one = compare_decode(ranked({1}, {6.0f}), g, 0, 3);
  EXPECT_DOUBLE_EQ(one.top_k_overlap, 1.0) << "K = 1: a greedy flip is judged as a rate only";
}

// The smoke reads a full row with read_row_pick and the comparison takes the row's argmax and
// top k from that pick: the same figures as ranking the row itself, and the pick is what it
// ranks by (a pick naming other ids changes them), unless it was made for another k.
TEST(FullDecodeComparison, APickedRowComparesAsTheRowItself) {
  const calbin::GoldenCase g = one_step(true);
  const std::vector<float> full = {4.0f, 6.0f, 1.0f, 2.0f, 6.0f, 8.0f};  // ids 1 and 4 tie
  DecodeRow row{full, {}, std::nullopt};
  const Comparison plain = compare_decode(row, g, 0, 3);
  row.pick = RowPick{argmax(full), top_k(full, 3)};
  const Comparison picked = compare_decode(row, g, 0, 3);
  EXPECT_EQ(picked.argmax, plain.argmax);
  EXPECT_EQ(picked.top_k_overlap, plain.top_k_overlap);
  EXPECT_EQ(picked.cosine, plain.cosine);
  EXPECT_EQ(row.best(), 5);

  row.pick = RowPick{2, {2, 3, 0}};
  const Comparison other = compare_decode(row, g, 0, 3);
  EXPECT_EQ(other.argmax, 2);
  EXPECT_NEAR(other.top_k_overlap, 1.0 / 3.0, 1e-12) << "of the golden's 5, 1, 0 only 0";
  EXPECT_EQ(row.best(), 2);

  row.pick = RowPick{2, {2, 3}};  // ranked for k = 2
  EXPECT_EQ(compare_decode(row, g, 0, 3).argmax, plain.argmax);
}

}  // namespace
}  // namespace runner
