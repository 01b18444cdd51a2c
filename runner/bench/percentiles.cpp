#include "runner/bench/percentiles.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace runner {

double nearest_rank(std::span<const double> sorted, double p) {
  if (sorted.empty()) {
    throw std::invalid_argument("nearest_rank: no samples");
  }
  if (!(p >= 0.0 && p <= 100.0)) {  // written so that NaN is rejected too
    throw std::invalid_argument("nearest_rank: percentile " + std::to_string(p) +
                                " is outside [0, 100]");
  }
  const double n = static_cast<double>(sorted.size());
  // p * n is exact for whole-number percentiles and any realistic n, and the division by
  // 100 is correctly rounded, so an exact integer rank (90 * 10 / 100 = 9) stays exact and
  // ceil() never lands one rank too high.
  auto rank = static_cast<size_t>(std::ceil(p * n / 100.0));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

Distribution summarize(std::vector<double> samples) {
  Distribution d;
  if (samples.empty()) {
    return d;
  }
  std::sort(samples.begin(), samples.end());
  d.count = samples.size();
  d.min = samples.front();
  d.max = samples.back();
  d.p50 = nearest_rank(samples, 50.0);
  d.p90 = nearest_rank(samples, 90.0);
  d.p95 = nearest_rank(samples, 95.0);
  d.p99 = nearest_rank(samples, 99.0);
  double sum = 0.0;
  for (const double x : samples) {
    sum += x;
  }
  d.mean = sum / static_cast<double>(samples.size());
  if (samples.size() > 1) {
    double squares = 0.0;  // two passes: no cancellation between sum and sum of squares
    for (const double x : samples) {
      squares += (x - d.mean) * (x - d.mean);
    }
    d.stddev = std::sqrt(squares / static_cast<double>(samples.size() - 1));
  }
  return d;
}

}  // namespace runner
