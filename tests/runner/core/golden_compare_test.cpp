// The comparisons against the device-contract reference: BF16 ULPs of a row's range, the
// lookup of a contract row by token, the localisation by layer probes, and the FP32 gates
// opened to the contract reference's distance.
#include "runner/core/golden_compare.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace runner {
namespace {

TEST(ContractComparison, CountsUlpsOfTheRowsLargestLogit) {
  // max |logit| 10: the BF16 ULP at 8..16 is 2^(3 - 7) = 0.0625.
  const std::vector<float> contract = {10.0f, -2.0f, 0.5f, 0.0f};
  std::vector<float> device = contract;
  EXPECT_EQ(compare_contract(device, contract).ulps, 0.0);
  EXPECT_EQ(compare_contract(device, contract).differing, 0u);
  device[1] = -2.125f;  // 0.125 = 2 ULPs of the range, though 8 ULPs at -2's own scale
  const ContractComparison c = compare_contract(device, contract);
  EXPECT_DOUBLE_EQ(c.ulps, 2.0);
  EXPECT_DOUBLE_EQ(c.mean_ulps, 0.5);
  EXPECT_EQ(c.differing, 1u);
  EXPECT_EQ(c.worst_id, 1);
  EXPECT_EQ(c.device, -2.125f);
  EXPECT_EQ(c.contract, -2.0f);
}

TEST(ContractComparison, ANanFromTheDeviceIsTheWorstLogit) {
  const std::vector<float> contract = {1.0f, 2.0f};
  const std::vector<float> device = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  const ContractComparison c = compare_contract(device, contract);
  EXPECT_TRUE(std::isinf(c.ulps));
  EXPECT_EQ(c.worst_id, 1);
}

TEST(ContractComparison, RowsOfDifferentLengthsAreAnError) {
  EXPECT_THROW(compare_contract(std::vector<float>{1.0f}, std::vector<float>{1.0f, 2.0f}),
               std::out_of_range);
}

TEST(ContractRow, FoundByTokenIndexOnly) {
  calbin::GoldenCase g;
  g.contract_rows = {255, 300, 301};
  EXPECT_EQ(contract_row_at(g, 255), 0u);
  EXPECT_EQ(contract_row_at(g, 300), 1u);
  EXPECT_EQ(contract_row_at(g, 301), 2u);
  EXPECT_FALSE(contract_row_at(g, 299).has_value());
  EXPECT_FALSE(contract_row_at(g, 1000).has_value());
  EXPECT_FALSE(contract_row_at(calbin::GoldenCase{}, 0).has_value());
}

TEST(Probes, PointsAreNamedByLayerAndOp) {
  EXPECT_EQ(probe_point_name(0), "embedding");
  EXPECT_EQ(probe_point_name(1), "layer 0 attention");
  EXPECT_EQ(probe_point_name(2), "layer 0 MLP");
  EXPECT_EQ(probe_point_name(5), "layer 2 attention");
}

TEST(Probes, RelativeErrorOfAPoint) {
  EXPECT_DOUBLE_EQ(relative_error(std::vector<float>{3, 4}, std::vector<float>{3, 4}), 0.0);
  EXPECT_DOUBLE_EQ(relative_error(std::vector<float>{3, 5}, std::vector<float>{3, 4}), 0.2);
  EXPECT_TRUE(std::isinf(relative_error(std::vector<float>{1}, std::vector<float>{0})));
}

// A correct device equals the contract at every point, so the first point with any error
// is where a defect enters, however deep: a tiny error at layer 40 is named as surely as a
// large one at the embedding, and nothing is excused as depth noise.
TEST(Probes, TheFirstPointThatDiffersIsNamed) {
  ProbeSummary clean;
  clean.add(std::vector<double>(97, 0.0));  // 48 layers
  EXPECT_NE(clean.describe(false).find("equals the contract at every layer and in every logit"),
            std::string::npos)
      << clean.describe(false);
  EXPECT_NE(clean.describe(true).find("the difference comes after the last layer"),
            std::string::npos)
      << clean.describe(true);
  ProbeSummary deep;
  std::vector<double> errors(97, 0.0);
  for (size_t p = 81; p < errors.size(); ++p) errors[p] = 1e-7 * static_cast<double>(p - 80);
  deep.add(errors);
  deep.add(std::vector<double>(97, 0.0));
  EXPECT_NE(deep.describe(true).find("layer 40 attention (mean relative error 5e-08 over 2 rows"),
            std::string::npos)
      << deep.describe(true);
  ProbeSummary mlp;
  mlp.add({0.0, 0.0, 0.17, 0.18, 0.24});
  EXPECT_NE(mlp.describe(true).find("layer 0 MLP"), std::string::npos) << mlp.describe(true);
  ProbeSummary embedding;
  embedding.add({1e-6, 0.0, 0.0, 0.0, 0.0});
  EXPECT_NE(embedding.describe(true).find("embedding"), std::string::npos)
      << embedding.describe(true);
}

TEST(Probes, UnavailableSaysWhy) {
  ProbeSummary none;
  none.unavailable = "the runtime offers no layer probes (CALRT_EXT_PROBE)";
  ProbeSummary merged;
  merged.merge(none);
  EXPECT_EQ(merged.describe(true),
            "layer probes unavailable: the runtime offers no layer probes (CALRT_EXT_PROBE)");
}

// The FP32 gates open to the contract reference's own distance from FP32 with the calibrated
// margins, never tighter than their thresholds and never past their ceilings.
TEST(ScaledGates, AReferenceInsideTheDefaultsChangesNothing) {
  const Thresholds defaults;
  Fp32Distance near;  // a reference as near FP32 as the presets' calibration
  near.cosine = 0.9999;
  near.max_abs_error = 0.1;
  near.top_k_overlap = 0.95;
  near.rel_rms = 0.01;
  near.gain_bias = 0.0002;
  near.greedy = 1.0;
  const Thresholds t = scaled_by_reference(defaults, near);
  EXPECT_EQ(t.min_cosine, defaults.min_cosine);
  EXPECT_EQ(t.max_abs_error, defaults.max_abs_error);
  EXPECT_EQ(t.min_top_k_overlap, defaults.min_top_k_overlap);
  EXPECT_EQ(t.max_mean_rel_rms, defaults.max_mean_rel_rms);
  EXPECT_EQ(t.max_gain_bias, defaults.max_gain_bias);
  EXPECT_EQ(t.min_greedy, defaults.min_greedy);
}

TEST(ScaledGates, AFartherReferenceOpensEachGateByItsMargin) {
  const Thresholds defaults;
  Fp32Distance far;
  far.cosine = 0.999;        // 1 - cos = 1e-3, x 1.5
  far.max_abs_error = 0.6;   // x 1.5
  far.top_k_overlap = 0.75;  // 0.1 below
  far.rel_rms = 0.02;        // x 1.1
  far.gain_bias = 0.002;     // + 0.0005
  far.greedy = 0.92;         // 0.05 below
  const Thresholds t = scaled_by_reference(defaults, far);
  EXPECT_NEAR(t.min_cosine, 1.0 - 1.5e-3, 1e-12);
  EXPECT_NEAR(t.max_abs_error, 0.9, 1e-12);
  EXPECT_NEAR(t.min_top_k_overlap, 0.65, 1e-12);
  EXPECT_NEAR(t.max_mean_rel_rms, 0.022, 1e-12);
  EXPECT_NEAR(t.max_gain_bias, 0.0025, 1e-12);
  EXPECT_NEAR(t.min_greedy, 0.87, 1e-12);
  // The tie margin and the contract gates are the shape's own already.
  EXPECT_EQ(t.tie_margin, defaults.tie_margin);
  EXPECT_EQ(t.max_contract_mean_ulps, defaults.max_contract_mean_ulps);
}

// A mixture of experts: a row whose W8A8 numerics route a token to other experts than FP32
// is far from FP32 by that discrete choice, so the per-row gates open past their ceilings to
// 1.5x (cosine, max abs) or 0.1 beyond (top-k) the reference's own row; the run gates keep
// their ceilings, so numerics that lose too much on average still fail.
TEST(ScaledGates, ARoutedModelsPerRowGatesHaveNoCeiling) {
  Thresholds routed;
  routed.routed_model = true;
  Fp32Distance flipped;
  flipped.cosine = 0.95;
  flipped.max_abs_error = 6.0;
  flipped.top_k_overlap = 0.3;
  flipped.rel_rms = 0.5;
  flipped.gain_bias = 0.2;
  flipped.greedy = 0.2;
  const Thresholds t = scaled_by_reference(routed, flipped);
  EXPECT_NEAR(t.min_cosine, 1.0 - 0.075, 1e-12);
  EXPECT_NEAR(t.max_abs_error, 9.0, 1e-12);
  EXPECT_NEAR(t.min_top_k_overlap, 0.2, 1e-12);
  EXPECT_EQ(t.max_mean_rel_rms, 0.15);
  EXPECT_EQ(t.max_gain_bias, 0.01);
  EXPECT_NEAR(t.min_greedy, 0.7, 1e-12);
  // The same row of a dense model stops at the ceilings.
  const Thresholds dense = scaled_by_reference(Thresholds{}, flipped);
  EXPECT_NEAR(dense.min_cosine, 0.95, 1e-12);
  EXPECT_EQ(dense.max_abs_error, 4.0);
  // A device beyond the opened row still fails it.
  Comparison device;
  device.cosine = 0.9;
  device.max_abs_error = 9.5;
  device.top_k_overlap = 0.1;
  EXPECT_EQ(judge_row(device, t).failures.size(), 3u);
}

// The greedy disagreement stands apart from the gate failures: a row that passes every gate
// but picks another token fails none, and the diagnosis still shows it, last.
TEST(JudgeRow, TheGreedyMismatchIsNotAGateFailure) {
  Comparison row;
  row.cosine = 1.0;
  row.top_k_overlap = 1.0;
  row.argmax = 5;
  row.expected_argmax = 7;
  const RowJudgement passing = judge_row(row, Thresholds{});
  EXPECT_TRUE(passing.failures.empty());
  ASSERT_TRUE(passing.greedy_mismatch.has_value());
  EXPECT_NE(passing.greedy_mismatch->find("argmax 5 != golden greedy token 7"), std::string::npos);
  row.cosine = 0.5;
  const RowJudgement failing = judge_row(row, Thresholds{});
  ASSERT_EQ(failing.failures.size(), 1u);
  EXPECT_NE(failing.failures[0].find("cosine"), std::string::npos);
  ASSERT_EQ(failing.all().size(), 2u);
  EXPECT_EQ(failing.all().back(), *failing.greedy_mismatch);
  row.argmax = 7;
  EXPECT_FALSE(judge_row(row, Thresholds{}).greedy_mismatch.has_value());
}

TEST(ScaledGates, NumericsThatLoseTooMuchHitTheCeiling) {
  Fp32Distance lossy;
  lossy.cosine = 0.9;
  lossy.max_abs_error = 50.0;
  lossy.top_k_overlap = 0.1;
  lossy.rel_rms = 0.5;
  lossy.gain_bias = 0.2;
  lossy.greedy = 0.2;
  const Thresholds t = scaled_by_reference(Thresholds{}, lossy);
  EXPECT_NEAR(t.min_cosine, 0.95, 1e-12);
  EXPECT_EQ(t.max_abs_error, 4.0);
  EXPECT_NEAR(t.min_top_k_overlap, 0.5, 1e-12);
  EXPECT_EQ(t.max_mean_rel_rms, 0.15);
  EXPECT_EQ(t.max_gain_bias, 0.01);
  EXPECT_NEAR(t.min_greedy, 0.7, 1e-12);
  // So a device exactly as far as that reference fails, and says where the reference is.
  Comparison device;
  device.cosine = lossy.cosine;
  device.max_abs_error = lossy.max_abs_error;
  device.top_k_overlap = lossy.top_k_overlap;
  Thresholds scaling;  // opens to `device` as its own reference, to the ceilings above
  scaling.scale_fp32_gates = true;
  const std::vector<std::string> why = judge_row(device, scaling, device).failures;
  ASSERT_EQ(why.size(), 3u);
  EXPECT_NE(why[0].find("contract reference 0.9"), std::string::npos) << why[0];
}

TEST(ScaledGates, ANanReferenceOpensNothing) {
  Fp32Distance nan;
  nan.cosine = nan.max_abs_error = nan.top_k_overlap = nan.rel_rms = nan.gain_bias = nan.greedy =
      std::numeric_limits<double>::quiet_NaN();
  const Thresholds defaults;
  const Thresholds t = scaled_by_reference(defaults, nan);
  EXPECT_EQ(t.min_cosine, defaults.min_cosine);
  EXPECT_EQ(t.max_abs_error, defaults.max_abs_error);
  EXPECT_EQ(t.max_mean_rel_rms, defaults.max_mean_rel_rms);
  EXPECT_EQ(t.min_greedy, defaults.min_greedy);
}

TEST(ScaledGates, ExplicitThresholdsStayTheFloor) {
  Thresholds strict;
  strict.max_mean_rel_rms = 0.03;  // looser than any reference here opens to
  Fp32Distance far;
  far.rel_rms = 0.02;
  EXPECT_EQ(scaled_by_reference(strict, far).max_mean_rel_rms, 0.03);
}

}  // namespace
}  // namespace runner
