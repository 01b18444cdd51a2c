// The comparisons against the device-contract reference: BF16 ULPs of a row's range, the
// lookup of a contract row by token, and the localisation by layer probes.
#include "runner/core/golden_compare.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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

// The tolerance grows with depth: noise that a deep point shows is no divergence, the same
// error at the first layer is.
TEST(Probes, TheFirstPointBeyondItsDepthsTolerance) {
  ProbeSummary clean;
  clean.add({0.0, 0.0, 0.0002, 0.0005, 0.0018});  // the worst clean means of 64 seeds
  EXPECT_NE(clean.describe().find("agrees with the contract after every layer"), std::string::npos)
      << clean.describe();
  ProbeSummary attention;
  attention.add({0.0, 0.001, 0.008, 0.009, 0.013});
  attention.add({0.0, 0.002, 0.008, 0.009, 0.013});
  EXPECT_NE(attention.describe().find("layer 0 attention (mean relative error 0.0015 over 2 rows"),
            std::string::npos)
      << attention.describe();
  ProbeSummary mlp;
  mlp.add({0.0, 0.0, 0.17, 0.18, 0.24});
  EXPECT_NE(mlp.describe().find("layer 0 MLP"), std::string::npos) << mlp.describe();
  ProbeSummary embedding;
  embedding.add({1e-6, 0.0, 0.0, 0.0, 0.0});
  EXPECT_NE(embedding.describe().find("embedding"), std::string::npos) << embedding.describe();
}

TEST(Probes, UnavailableSaysWhy) {
  ProbeSummary none;
  none.unavailable = "the runtime offers no layer probes (CALRT_EXT_PROBE)";
  ProbeSummary merged;
  merged.merge(none);
  EXPECT_EQ(merged.describe(),
            "layer probes unavailable: the runtime offers no layer probes (CALRT_EXT_PROBE)");
}

}  // namespace
}  // namespace runner
