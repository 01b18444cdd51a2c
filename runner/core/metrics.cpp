#include "runner/core/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <unordered_set>

namespace runner {

double gain(std::span<const float> actual, std::span<const float> expected) {
  if (actual.size() != expected.size()) {
    throw std::invalid_argument("gain: lengths differ");
  }
  double dot = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    dot += double{actual[i]} * double{expected[i]};
    norm += double{expected[i]} * double{expected[i]};
  }
  return norm > 0.0 ? dot / norm : std::numeric_limits<double>::quiet_NaN();
}

double relative_rms_error(std::span<const float> actual, std::span<const float> expected) {
  if (actual.size() != expected.size()) {
    throw std::invalid_argument("relative_rms_error: lengths differ");
  }
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double d = double{actual[i]} - double{expected[i]};
    diff += d * d;
    norm += double{expected[i]} * double{expected[i]};
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::numeric_limits<double>::quiet_NaN();
}

double cosine(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) {
    throw std::invalid_argument("cosine: lengths differ");
  }
  double dot = 0.0;
  double norm_a = 0.0;
  double norm_b = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += double{a[i]} * double{b[i]};
    norm_a += double{a[i]} * double{a[i]};
    norm_b += double{b[i]} * double{b[i]};
  }
  if (std::isnan(dot) || std::isnan(norm_a) || std::isnan(norm_b)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (norm_a == 0.0 && norm_b == 0.0) {
    return 1.0;
  }
  if (norm_a == 0.0 || norm_b == 0.0) {
    return 0.0;
  }
  return dot / (std::sqrt(norm_a) * std::sqrt(norm_b));
}

double max_abs_error(std::span<const float> actual, std::span<const float> expected,
                     std::span<const int32_t> ids) {
  if (actual.size() != expected.size()) {
    throw std::invalid_argument("max_abs_error: lengths differ");
  }
  double worst = 0.0;
  auto fold = [&](size_t i) {
    const double error = std::fabs(double{actual[i]} - double{expected[i]});
    // NaN must not be lost by std::max, so it propagates explicitly.
    worst = std::isnan(error) || std::isnan(worst) ? std::numeric_limits<double>::quiet_NaN()
                                                   : std::max(worst, error);
  };
  if (ids.empty()) {
    for (size_t i = 0; i < actual.size(); ++i) {
      fold(i);
    }
  }
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= actual.size()) {
      throw std::out_of_range("max_abs_error: id " + std::to_string(id) + " out of range");
    }
    fold(static_cast<size_t>(id));
  }
  return worst;
}

double max_abs_error_at(std::span<const float> actual, std::span<const int32_t> ids,
                        std::span<const float> expected_at_ids) {
  if (ids.size() != expected_at_ids.size()) {
    throw std::invalid_argument("max_abs_error_at: ids and values differ in length");
  }
  double worst = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= actual.size()) {
      throw std::out_of_range("max_abs_error_at: id " + std::to_string(ids[i]) + " out of range");
    }
    const double error =
        std::fabs(double{actual[static_cast<size_t>(ids[i])]} - double{expected_at_ids[i]});
    worst = std::isnan(error) || std::isnan(worst) ? std::numeric_limits<double>::quiet_NaN()
                                                   : std::max(worst, error);
  }
  return worst;
}

double top_k_overlap(std::span<const int32_t> a, std::span<const int32_t> b) {
  if (b.empty()) {
    return 1.0;
  }
  const std::unordered_set<int32_t> in_a(a.begin(), a.end());
  const std::unordered_set<int32_t> in_b(b.begin(), b.end());
  size_t common = 0;
  for (const int32_t id : in_b) {
    common += in_a.count(id);
  }
  return static_cast<double>(common) / static_cast<double>(in_b.size());
}

void MetricSummary::add(double cosine_value, double max_abs_error_value,
                        double top_k_overlap_value) {
  // A NaN must stick: min/max would drop it and a broken device would look fine.
  auto keep_min = [](double& slot, double value) {
    if (!std::isnan(slot)) {
      slot = std::isnan(value) ? value : std::min(slot, value);
    }
  };
  keep_min(cosine_min, cosine_value);
  keep_min(top_k_overlap_min, top_k_overlap_value);
  max_abs_error_max = std::isnan(max_abs_error_value) || std::isnan(max_abs_error_max)
                          ? std::numeric_limits<double>::quiet_NaN()
                          : std::max(max_abs_error_max, max_abs_error_value);
  ++compared;
}

void MetricSummary::add_bias(double gain_value, double rel_rms_value) {
  // NaN sticks in the sums, and fails every gate on their means.
  gain_sum += gain_value;
  rel_rms_sum += rel_rms_value;
  rel_rms_max = std::isnan(rel_rms_value) || std::isnan(rel_rms_max)
                    ? std::numeric_limits<double>::quiet_NaN()
                    : std::max(rel_rms_max, rel_rms_value);
}

void MetricSummary::add_greedy(bool agree, bool decisive) {
  if (decisive) {
    greedy_agree += agree ? 1 : 0;
    ++greedy_total;
  } else {
    ++near_ties;
    near_tie_swaps += agree ? 0 : 1;
  }
}

void MetricSummary::merge(const MetricSummary& other) {
  if (other.compared > 0) {
    add(other.cosine_min, other.max_abs_error_max, other.top_k_overlap_min);
    compared += other.compared - 1;
    gain_sum += other.gain_sum;
    rel_rms_sum += other.rel_rms_sum;
    rel_rms_max = std::isnan(other.rel_rms_max) || std::isnan(rel_rms_max)
                      ? std::numeric_limits<double>::quiet_NaN()
                      : std::max(rel_rms_max, other.rel_rms_max);
  }
  greedy_agree += other.greedy_agree;
  greedy_total += other.greedy_total;
  near_ties += other.near_ties;
  near_tie_swaps += other.near_tie_swaps;
}

double MetricSummary::mean_gain() const {
  return compared == 0 ? 1.0 : gain_sum / static_cast<double>(compared);
}

double MetricSummary::mean_rel_rms() const {
  return compared == 0 ? 0.0 : rel_rms_sum / static_cast<double>(compared);
}

double MetricSummary::greedy_rate() const {
  return greedy_total == 0 ? 1.0
                           : static_cast<double>(greedy_agree) / static_cast<double>(greedy_total);
}

}  // namespace runner
