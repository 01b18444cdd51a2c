// runner/metrics against values computed by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "runner/core/metrics.hpp"

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

// The rule spelled out: NaN last, larger value first, lower id on ties.
bool ranks_before(const std::vector<float>& v, size_t x, size_t y) {
  if (std::isnan(v[x]) || std::isnan(v[y])) {
    return std::isnan(v[x]) == std::isnan(v[y]) ? x < y : std::isnan(v[y]);
  }
  return v[x] > v[y] || (v[x] == v[y] && x < y);
}

std::vector<int32_t> sorted_top_k(const std::vector<float>& v, size_t k) {
  std::vector<int32_t> ids(v.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t x, int32_t y) {
    return ranks_before(v, static_cast<size_t>(x), static_cast<size_t>(y));
  });
  ids.resize(std::min(k, ids.size()));
  return ids;
}

TEST(TopK, TiesAtTheKthPlaceGoToTheLowerIds) {
  // Ten equal values, of which only the first three fit: the ones with the lowest ids, even
  // though the scan meets the others after the heap is full.
  std::vector<float> values(5000, 0.0f);
  for (size_t i = 0; i < 10; ++i) {
    values[300 + i * 400] = 7.0f;
  }
  values[4999] = 9.0f;
  values[17] = 8.0f;
  EXPECT_EQ(runner::top_k(values, 5), (std::vector<int32_t>{4999, 17, 300, 700, 1100}));
  EXPECT_EQ(runner::argmax(values), 4999);
}

TEST(TopK, SignedZerosTieAndInfinitiesRank) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values = {0.0f, -0.0f, -inf, inf, -0.0f, 0.0f, -1.0f};
  EXPECT_EQ(runner::top_k(values, 7), (std::vector<int32_t>{3, 0, 1, 4, 5, 6, 2}));
  EXPECT_EQ(runner::argmax(std::vector<float>{-0.0f, 0.0f}), 0);
  EXPECT_EQ(runner::argmax(std::vector<float>{-inf, -inf}), 0);
}

TEST(TopK, NaNsFillUpOnlyWhenNumbersRunOut) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values(300, nan);
  values[250] = 1.0f;
  values[100] = 2.0f;
  values[200] = 1.0f;
  // Three numbers, then the NaNs by id.
  EXPECT_EQ(runner::top_k(values, 6), (std::vector<int32_t>{100, 200, 250, 0, 1, 2}));
  EXPECT_EQ(runner::argmax(values), 100);
  const std::vector<float> all_nan(70, nan);
  EXPECT_EQ(runner::top_k(all_nan, 3), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(runner::argmax(all_nan), 0);
  EXPECT_TRUE(runner::top_k(std::vector<float>{}, 3).empty());
  EXPECT_TRUE(runner::top_k(values, 0).empty());
}

TEST(TopK, MatchesSortingEverythingOnBf16LikeRows) {
  // Few distinct values (as BF16 logits have), NaNs sprinkled in, lengths around the scan's
  // blocks, and k from 1 to past the length.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(-40, 40);
  std::uniform_int_distribution<int> percent(0, 99);
  for (const size_t n : {size_t{1}, size_t{7}, size_t{63}, size_t{64}, size_t{65}, size_t{129},
                         size_t{1000}, size_t{4099}}) {
    std::vector<float> values(n);
    for (float& v : values) {
      v = percent(rng) < 3 ? std::numeric_limits<float>::quiet_NaN()
                           : static_cast<float>(level(rng)) * 0.5f;
    }
    for (const size_t k : {size_t{1}, size_t{2}, size_t{40}, n, n + 5}) {
      EXPECT_EQ(runner::top_k(values, k), sorted_top_k(values, k)) << "n " << n << " k " << k;
    }
    EXPECT_EQ(runner::argmax(values), sorted_top_k(values, 1).front()) << "n " << n;
  }
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

TEST(Gain, SeesAScaleThatCosineCannot) {
  const std::vector<float> golden = {1, -2, 3};
  std::vector<float> scaled = golden;
  for (float& v : scaled) v *= 1.5f;
  EXPECT_NEAR(runner::cosine(scaled, golden), 1.0, 1e-12);
  EXPECT_NEAR(runner::gain(scaled, golden), 1.5, 1e-12);
  // (1,0,0) on (1,1,0): <a,e> = 1, <e,e> = 2.
  const std::vector<float> a = {1, 0, 0};
  const std::vector<float> e = {1, 1, 0};
  EXPECT_NEAR(runner::gain(a, e), 0.5, 1e-12);
  const std::vector<float> zero = {0, 0, 0};
  EXPECT_TRUE(std::isnan(runner::gain(a, zero)));
  const std::vector<float> shorter = {1, 2};
  EXPECT_THROW((void)runner::gain(shorter, golden), std::invalid_argument);
}

TEST(RelativeRmsError, HandComputed) {
  // ||(3,4) - (0,4)|| / ||(0,4)|| = 3 / 4.
  const std::vector<float> a = {3, 4};
  const std::vector<float> e = {0, 4};
  EXPECT_NEAR(runner::relative_rms_error(a, e), 0.75, 1e-12);
  EXPECT_EQ(runner::relative_rms_error(e, e), 0.0);
  const std::vector<float> zero = {0, 0};
  EXPECT_TRUE(std::isnan(runner::relative_rms_error(a, zero)));
}

TEST(MetricSummary, MeansOfGainAndErrorOverMergedPhases) {
  MetricSummary prefill;
  prefill.add(1.0, 0.0, 1.0);
  prefill.add_bias(1.02, 0.01);
  MetricSummary decode;
  decode.add(1.0, 0.0, 1.0);
  decode.add(1.0, 0.0, 1.0);
  decode.add_bias(0.99, 0.02);
  decode.add_bias(1.00, 0.03);
  EXPECT_NEAR(decode.mean_gain(), 0.995, 1e-12);
  EXPECT_NEAR(decode.mean_rel_rms(), 0.025, 1e-12);
  prefill.merge(decode);
  EXPECT_EQ(prefill.compared, 3u);
  EXPECT_NEAR(prefill.mean_gain(), (1.02 + 0.99 + 1.00) / 3, 1e-12);
  EXPECT_NEAR(prefill.rel_rms_max, 0.03, 1e-12);
  EXPECT_DOUBLE_EQ(MetricSummary{}.mean_gain(), 1.0);
  MetricSummary broken;
  broken.add(1.0, 0.0, 1.0);
  broken.add_bias(std::numeric_limits<double>::quiet_NaN(), 0.0);
  EXPECT_TRUE(std::isnan(broken.mean_gain()));  // fails |gain - 1| <= bias, never passes it
}

TEST(MetricSummary, NearTiesAreCountedApartFromTheGreedyRate) {
  MetricSummary m;
  m.add_greedy(true);
  m.add_greedy(false, /*decisive=*/false);
  m.add_greedy(true, /*decisive=*/false);
  EXPECT_EQ(m.greedy_total, 1u);
  EXPECT_DOUBLE_EQ(m.greedy_rate(), 1.0);
  EXPECT_EQ(m.near_ties, 2u);
  EXPECT_EQ(m.near_tie_swaps, 1u);
  MetricSummary other;
  other.add_greedy(false);
  other.add_greedy(false, false);
  m.merge(other);
  EXPECT_DOUBLE_EQ(m.greedy_rate(), 0.5);
  EXPECT_EQ(m.near_tie_swaps, 2u);
}

}  // namespace
