#include "runner/core/golden_compare.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "runner/core/metrics.hpp"

namespace runner {

Comparison compare_prefill(std::span<const float> logits, const calbin::GoldenCase& golden,
                           size_t top_k_count) {
  const std::vector<int32_t> golden_top = top_k(golden.prefill_logits, top_k_count);
  Comparison c;
  c.cosine = cosine(logits, golden.prefill_logits);
  c.max_abs_error = max_abs_error(logits, golden.prefill_logits, golden_top);
  c.top_k_overlap = top_k_overlap(top_k(logits, top_k_count), golden_top);
  c.gain = gain(logits, golden.prefill_logits);
  c.rel_rms = relative_rms_error(logits, golden.prefill_logits);
  c.argmax = argmax(logits);
  c.expected_argmax = golden.greedy[0];
  if (golden_top.size() >= 2) {
    c.golden_margin = double{golden.prefill_logits[static_cast<size_t>(golden_top[0])]} -
                      double{golden.prefill_logits[static_cast<size_t>(golden_top[1])]};
  }
  return c;
}

Comparison compare_decode(std::span<const float> logits, const calbin::GoldenCase& golden,
                          uint32_t step, size_t top_k_count) {
  const std::span<const int32_t> ids(golden.top_ids.data() + step * top_k_count, top_k_count);
  const std::span<const float> values(golden.top_logits.data() + step * top_k_count, top_k_count);
  Comparison c;
  if (golden.decode_logits.empty()) {
    std::vector<float> at_ids;
    for (const int32_t id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= logits.size()) {
        throw std::out_of_range(
            fmt::format("golden top id {} outside the logits row of {}", id, logits.size()));
      }
      at_ids.push_back(logits[static_cast<size_t>(id)]);
    }
    c.cosine = cosine(at_ids, values);
    c.gain = gain(at_ids, values);
    c.rel_rms = relative_rms_error(at_ids, values);
  } else {
    const std::span<const float> row(golden.decode_logits.data() + step * logits.size(),
                                     logits.size());
    c.cosine = cosine(logits, row);
    c.gain = gain(logits, row);
    c.rel_rms = relative_rms_error(logits, row);
  }
  if (values.size() >= 2) c.golden_margin = double{values[0]} - double{values[1]};
  c.max_abs_error = max_abs_error_at(logits, ids, values);
  c.top_k_overlap = top_k_overlap(top_k(logits, top_k_count), ids);
  c.argmax = argmax(logits);
  c.expected_argmax = golden.greedy[step + 1];
  return c;
}

std::vector<std::string> shortfalls(const Comparison& c, const Thresholds& t) {
  std::vector<std::string> why;
  if (!(c.cosine >= t.min_cosine)) {  // written so that NaN fails
    why.push_back(fmt::format("cosine {:.6f} < {}", c.cosine, t.min_cosine));
  }
  if (!(c.max_abs_error <= t.max_abs_error)) {
    why.push_back(fmt::format("max abs error {:.5f} > {}", c.max_abs_error, t.max_abs_error));
  }
  if (!(c.top_k_overlap >= t.min_top_k_overlap)) {
    why.push_back(fmt::format("top-k overlap {:.3f} < {}", c.top_k_overlap, t.min_top_k_overlap));
  }
  if (c.argmax != c.expected_argmax) {
    why.push_back(fmt::format("argmax {} != golden greedy token {}", c.argmax, c.expected_argmax));
  }
  return why;
}

ContractComparison compare_contract(std::span<const float> logits, std::span<const float> row) {
  ContractComparison c;
  if (logits.size() != row.size()) {
    throw std::out_of_range(
        fmt::format("logits row of {} against a contract row of {}", logits.size(), row.size()));
  }
  float range = 0.0f;
  for (const float v : row) range = std::max(range, std::fabs(v));
  // A row of zeros has no scale of its own: the smallest normal BF16 ULP stands in.
  const double unit = range > 0.0f ? std::ldexp(1.0, std::ilogb(range) - 7) : std::ldexp(1.0, -133);
  double sum = 0.0;
  for (size_t i = 0; i < row.size(); ++i) {
    const double error = std::fabs(double{logits[i]} - double{row[i]}) / unit;
    sum += error;
    if (logits[i] != row[i]) ++c.differing;
    // Written so that a NaN from the device becomes the worst logit.
    if (!(error <= c.ulps)) {
      c.ulps = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
      c.worst_id = static_cast<int32_t>(i);
      c.device = logits[i];
      c.contract = row[i];
    }
  }
  c.mean_ulps = row.empty() ? 0.0 : sum / static_cast<double>(row.size());
  return c;
}

void ContractSummary::add(const ContractComparison& c, size_t row_size) {
  ++rows;
  logits += row_size;
  differing += c.differing;
  max_ulps = std::max(max_ulps, c.ulps);
  ulps_sum += c.mean_ulps;
}

void ContractSummary::merge(const ContractSummary& other) {
  rows += other.rows;
  logits += other.logits;
  differing += other.differing;
  max_ulps = std::max(max_ulps, other.max_ulps);
  ulps_sum += other.ulps_sum;
}

std::optional<size_t> contract_row_at(const calbin::GoldenCase& golden, uint64_t index) {
  const auto& rows = golden.contract_rows;  // increasing: the golden reader checks it
  const auto found = std::lower_bound(rows.begin(), rows.end(), static_cast<int64_t>(index),
                                      [](int32_t row, int64_t value) { return row < value; });
  if (found == rows.end() || *found != static_cast<int64_t>(index)) {
    return std::nullopt;
  }
  return static_cast<size_t>(found - rows.begin());
}

double relative_error(std::span<const float> device, std::span<const float> contract) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < contract.size(); ++i) {
    const double d = i < device.size() ? double{device[i]} : 0.0;
    diff += (d - contract[i]) * (d - contract[i]);
    norm += double{contract[i]} * contract[i];
  }
  if (norm == 0.0) {
    return diff == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  }
  const double error = std::sqrt(diff / norm);
  return std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
}

double probe_tolerance(size_t point) {
  const auto p = static_cast<double>(point);
  return 0.0005 * p * p;
}

std::optional<size_t> first_divergent_point(const std::vector<double>& mean_errors) {
  for (size_t p = 0; p < mean_errors.size(); ++p) {
    if (!(mean_errors[p] <= probe_tolerance(p))) return p;
  }
  return std::nullopt;
}

void ProbeSummary::add(const std::vector<double>& errors) {
  error_sums.resize(std::max(error_sums.size(), errors.size()), 0.0);
  for (size_t p = 0; p < errors.size(); ++p) error_sums[p] += errors[p];
  ++rows;
}

void ProbeSummary::merge(const ProbeSummary& other) {
  error_sums.resize(std::max(error_sums.size(), other.error_sums.size()), 0.0);
  for (size_t p = 0; p < other.error_sums.size(); ++p) error_sums[p] += other.error_sums[p];
  rows += other.rows;
  if (unavailable.empty()) unavailable = other.unavailable;
}

std::vector<double> ProbeSummary::mean_errors() const {
  std::vector<double> means = error_sums;
  for (double& m : means) m /= static_cast<double>(std::max<uint64_t>(rows, 1));
  return means;
}

std::string ProbeSummary::describe() const {
  if (rows == 0) {
    return "layer probes unavailable: " + (unavailable.empty() ? "none compared" : unavailable);
  }
  const std::vector<double> means = mean_errors();
  if (const auto first = first_divergent_point(means)) {
    return fmt::format(
        "first divergence from the contract: {} (mean relative error {:.4f} over {} rows, "
        "tolerance {:.4f}; {:.4f} before it)",
        probe_point_name(*first), means[*first], rows, probe_tolerance(*first),
        *first == 0 ? 0.0 : means[*first - 1]);
  }
  return fmt::format(
      "the residual stream agrees with the contract after every layer (mean relative error at "
      "most {:.4f} over {} rows): the divergence comes after the last layer (final norm, "
      "lm_head, logits output)",
      *std::max_element(means.begin(), means.end()), rows);
}

std::string probe_point_name(size_t point) {
  if (point == 0) return "embedding";
  return fmt::format("layer {} {}", (point - 1) / 2, point % 2 == 1 ? "attention" : "MLP");
}

uint32_t kv_tokens_for(const calbin::GoldenCase& golden, uint32_t context) {
  return std::min(context, golden.prompt_len + std::max(golden.decode_steps, 1u));
}

}  // namespace runner
