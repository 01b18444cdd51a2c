// runner/metrics against values computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "runner/metrics.hpp"

namespace {

using runner::MetricSummary;

TEST(Cosine, HandComputed) {
  // (1,2,2).(2,1,2) = 8; |a| = |b| = 3 -> 8/9.
  const std::vector<float> a = {1, 2, 2};
  const std::vector<float> b = {2, 1, 2};
  EXPECT_NEAR(runner::cosine(a, b), 8.0 / 9.0, 1e-12);
  EXPECT_NEAR(runner::cosine(a, a), 1.0, 1e-12);
  const std::vector<float> minus = {-1, -2, -2};
  EXPECT_NEAR(runner::cosine(a, minus), -1.0, 1e-12);
}

TEST(Cosine, ZeroAndNaN) {
  const std::vector<float> zero = {0, 0};
  const std::vector<float> one = {1, 0};
  EXPECT_EQ(runner::cosine(zero, zero), 1.0);
  EXPECT_EQ(runner::cosine(zero, one), 0.0);
  const std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), 1};
  EXPECT_TRUE(std::isnan(runner::cosine(nan, one)));
  EXPECT_THROW(runner::cosine(one, std::vector<float>{1}), std::invalid_argument);
}

TEST(MaxAbsError, AllAndAtIds) {
  const std::vector<float> actual = {1.0f, 5.0f, -2.0f, 0.5f};
  const std::vector<float> expected = {1.5f, 4.0f, 1.0f, 0.5f};
  EXPECT_DOUBLE_EQ(runner::max_abs_error(actual, expected), 3.0);  // |-2 - 1|
  const std::vector<int32_t> ids = {0, 1};
  EXPECT_DOUBLE_EQ(runner::max_abs_error(actual, expected, ids), 1.0);  // |5 - 4|
  const std::vector<float> at_ids = {0.0f, 5.25f};
  EXPECT_DOUBLE_EQ(runner::max_abs_error_at(actual, ids, at_ids), 1.0);  // |1 - 0|
  const std::vector<int32_t> bad = {4};
  EXPECT_THROW(runner::max_abs_error(actual, expected, bad), std::out_of_range);
}

TEST(TopK, OrderTiesAndNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> values = {0.5f, 3.0f, nan, 3.0f, -1.0f, 2.0f};
  EXPECT_EQ(runner::top_k(values, 3), (std::vector<int32_t>{1, 3, 5}));  // tie: lower id first
  EXPECT_EQ(runner::top_k(values, 6).back(), 2);                         // NaN last
  EXPECT_EQ(runner::top_k(values, 100).size(), 6u);
  EXPECT_EQ(runner::argmax(values), 1);
  EXPECT_EQ(runner::argmax(std::vector<float>{}), -1);
  EXPECT_EQ(runner::argmax(std::vector<float>{nan, -5.0f}), 1);
}

TEST(TopKOverlap, FractionOfReference) {
  const std::vector<int32_t> device = {1, 2, 3, 4};
  const std::vector<int32_t> golden = {4, 3, 9, 8};
  EXPECT_DOUBLE_EQ(runner::top_k_overlap(device, golden), 0.5);
  EXPECT_DOUBLE_EQ(runner::top_k_overlap(device, device), 1.0);
  EXPECT_DOUBLE_EQ(runner::top_k_overlap(device, std::vector<int32_t>{}), 1.0);
}

TEST(MetricSummary, AggregatesAndKeepsNaN) {
  MetricSummary m;
  m.add(0.99, 0.2, 1.0);
  m.add(0.98, 0.1, 0.9);
  m.add_greedy(true);
  m.add_greedy(false);
  EXPECT_DOUBLE_EQ(m.cosine_min, 0.98);
  EXPECT_DOUBLE_EQ(m.max_abs_error_max, 0.2);
  EXPECT_DOUBLE_EQ(m.top_k_overlap_min, 0.9);
  EXPECT_DOUBLE_EQ(m.greedy_rate(), 0.5);
  MetricSummary other;
  other.add(std::numeric_limits<double>::quiet_NaN(), 0.0, 1.0);
  m.merge(other);
  EXPECT_TRUE(std::isnan(m.cosine_min));  // a NaN must never look like a pass
  EXPECT_EQ(m.compared, 3u);
  EXPECT_DOUBLE_EQ(MetricSummary{}.greedy_rate(), 1.0);
}

}  // namespace
