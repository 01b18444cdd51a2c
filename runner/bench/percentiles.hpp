// Order statistics of benchmark samples. Stage 11 asks for P50/P90/P99, never only means.
//
// Method: nearest rank on the sorted samples (no interpolation), so every reported
// percentile is a value that was actually measured and the result does not depend on
// floating-point interpolation: with n samples sorted ascending as x[1..n],
//   P_p = x[ceil(p / 100 * n)]  for 0 < p <= 100,  and P_0 = x[1] (the minimum).
// Example: samples {15, 20, 35, 40, 50}: P50 = x[3] = 35, P90 = x[5] = 50, P30 = x[2] = 20.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace runner {

// The nearest-rank percentile `p` (0..100) of samples that are already sorted ascending.
// Throws std::invalid_argument for an empty span or p outside [0, 100] (or NaN).
double nearest_rank(std::span<const double> sorted, double p);

struct Distribution {
  size_t count = 0;
  double min = 0.0;
  double p50 = 0.0;
  double p90 = 0.0;
  double p95 = 0.0;
  double p99 = 0.0;
  double max = 0.0;
  double mean = 0.0;  // arithmetic mean, summed in ascending order
  // Sample standard deviation (n - 1 in the denominator, as llama-bench and trtexec report
  // over repetitions); 0 for a single sample.
  double stddev = 0.0;
};

// Count, min, P50, P90, P99, max and mean of `samples` (any order); all zero with count 0
// for no samples.
Distribution summarize(std::vector<double> samples);

}  // namespace runner
