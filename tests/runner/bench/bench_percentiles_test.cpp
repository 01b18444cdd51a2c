// Nearest-rank percentiles (runner/bench/percentiles.hpp) against values computed by hand:
// P_p = x[ceil(p / 100 * n)] on the sorted samples, 1-based, P_0 = the minimum.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "runner/bench/percentiles.hpp"

namespace runner {
namespace {

TEST(BenchPercentiles, FiveSamplesByHand) {
  const std::vector<double> x = {15, 20, 35, 40, 50};
  EXPECT_EQ(nearest_rank(x, 50), 35);   // ceil(2.5) = 3
  EXPECT_EQ(nearest_rank(x, 90), 50);   // ceil(4.5) = 5
  EXPECT_EQ(nearest_rank(x, 99), 50);   // ceil(4.95) = 5
  EXPECT_EQ(nearest_rank(x, 30), 20);   // ceil(1.5) = 2
  EXPECT_EQ(nearest_rank(x, 40), 20);   // exactly rank 2: not pushed to 3
  EXPECT_EQ(nearest_rank(x, 0), 15);    // the minimum
  EXPECT_EQ(nearest_rank(x, 100), 50);  // the maximum
}

TEST(BenchPercentiles, ExactIntegerRanksStayExact) {
  std::vector<double> ten(10);
  std::iota(ten.begin(), ten.end(), 1.0);  // 1..10
  EXPECT_EQ(nearest_rank(ten, 10), 1);
  EXPECT_EQ(nearest_rank(ten, 50), 5);  // 0.5 * 10 = 5, not 6
  EXPECT_EQ(nearest_rank(ten, 90), 9);  // 0.9 * 10 = 9, not 10
  EXPECT_EQ(nearest_rank(ten, 99), 10);

  std::vector<double> hundred(100);
  std::iota(hundred.begin(), hundred.end(), 1.0);  // 1..100
  EXPECT_EQ(nearest_rank(hundred, 50), 50);
  EXPECT_EQ(nearest_rank(hundred, 90), 90);
  EXPECT_EQ(nearest_rank(hundred, 99), 99);  // 0.99 * 100 = 99 exactly

  std::vector<double> two_hundred(200);
  std::iota(two_hundred.begin(), two_hundred.end(), 1.0);
  EXPECT_EQ(nearest_rank(two_hundred, 99), 198);
  EXPECT_EQ(nearest_rank(two_hundred, 99.9), 200);  // ceil(199.8)
}

TEST(BenchPercentiles, OneSampleIsEveryPercentile) {
  const std::vector<double> x = {7.25};
  for (const double p : {0.0, 1.0, 50.0, 90.0, 99.0, 100.0}) {
    EXPECT_EQ(nearest_rank(x, p), 7.25) << "p" << p;
  }
}

TEST(BenchPercentiles, RejectsNoSamplesAndBadPercentiles) {
  EXPECT_THROW(nearest_rank(std::vector<double>{}, 50), std::invalid_argument);
  const std::vector<double> x = {1, 2};
  EXPECT_THROW(nearest_rank(x, -1), std::invalid_argument);
  EXPECT_THROW(nearest_rank(x, 100.5), std::invalid_argument);
  EXPECT_THROW(nearest_rank(x, std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
}

TEST(BenchPercentiles, SummarizeSortsAndReportsEverything) {
  const Distribution d = summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(d.count, 5u);
  EXPECT_EQ(d.min, 1);
  EXPECT_EQ(d.p50, 3);
  EXPECT_EQ(d.p90, 5);
  EXPECT_EQ(d.p95, 5);
  EXPECT_EQ(d.p99, 5);
  EXPECT_EQ(d.max, 5);
  EXPECT_DOUBLE_EQ(d.mean, 3.0);
  // Sample standard deviation by hand: squared deviations 4+1+0+1+4 = 10, over n - 1 = 4.
  EXPECT_DOUBLE_EQ(d.stddev, std::sqrt(2.5));

  // A long tail shows in P99 and max, not in P50: why the reports never give only means.
  std::vector<double> tail(99, 10.0);
  tail.push_back(1000.0);
  const Distribution t = summarize(tail);
  EXPECT_EQ(t.p50, 10);
  EXPECT_EQ(t.p90, 10);
  EXPECT_EQ(t.p95, 10);  // rank 95 of 100
  EXPECT_EQ(t.p99, 10);  // rank 99 of 100
  EXPECT_EQ(t.max, 1000);
  EXPECT_DOUBLE_EQ(t.mean, 19.9);
}

TEST(BenchPercentiles, P95IsItsOwnRankAndOneSampleHasNoSpread) {
  std::vector<double> ramp;
  for (int i = 1; i <= 20; ++i) ramp.push_back(i);  // rank 19 of 20 is P95
  const Distribution d = summarize(ramp);
  EXPECT_EQ(d.p90, 18);
  EXPECT_EQ(d.p95, 19);
  EXPECT_EQ(d.p99, 20);
  EXPECT_EQ(summarize({7.0}).stddev, 0.0);
  EXPECT_EQ(summarize({4.0, 4.0, 4.0}).stddev, 0.0);
}

TEST(BenchPercentiles, NoSamplesGiveCountZero) {
  const Distribution d = summarize({});
  EXPECT_EQ(d.count, 0u);
  EXPECT_EQ(d.p50, 0);
  EXPECT_EQ(d.mean, 0);
}

}  // namespace
}  // namespace runner
