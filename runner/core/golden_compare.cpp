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

namespace {

// compare_decode of a full row, with its argmax and top k when read_row_pick ranked it for
// `top_k_count` (the same ids as ranking it here, bit for bit).
Comparison compare_full_decode(std::span<const float> logits, const calbin::GoldenCase& golden,
                               uint32_t step, size_t top_k_count,
                               const std::optional<RowPick>& pick) {
  const bool picked = pick && pick->top_k.size() == std::min(top_k_count, logits.size());
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
  c.top_k_overlap = top_k_overlap(picked ? pick->top_k : top_k(logits, top_k_count), ids);
  c.argmax = picked ? pick->argmax : argmax(logits);
  c.expected_argmax = golden.greedy[step + 1];
  return c;
}

}  // namespace

Comparison compare_decode(std::span<const float> logits, const calbin::GoldenCase& golden,
                          uint32_t step, size_t top_k_count) {
  return compare_full_decode(logits, golden, step, top_k_count, std::nullopt);
}

Comparison compare_decode(const DecodeRow& row, const calbin::GoldenCase& golden, uint32_t step,
                          size_t top_k_count) {
  if (!row.ranked()) {
    return compare_full_decode(row.logits, golden, step, top_k_count, row.pick);
  }
  const std::span<const int32_t> ids(golden.top_ids.data() + step * top_k_count, top_k_count);
  const std::span<const float> values(golden.top_logits.data() + step * top_k_count, top_k_count);
  const size_t vocab =
      golden.decode_steps == 0 ? 0 : golden.decode_logits.size() / golden.decode_steps;
  const std::span<const float> golden_row =
      golden.decode_logits.empty()
          ? std::span<const float>()
          : std::span<const float>(golden.decode_logits.data() + step * vocab, vocab);
  // The (device, golden) pairs at the device's ids where the golden has a value.
  std::vector<float> device, expected;
  for (size_t j = 0; j < row.ids.size(); ++j) {
    const int32_t id = row.ids[j];
    if (!golden_row.empty()) {
      if (id < 0 || static_cast<size_t>(id) >= golden_row.size()) continue;
      device.push_back(row.logits[j]);
      expected.push_back(golden_row[static_cast<size_t>(id)]);
    } else if (const auto at = std::find(ids.begin(), ids.end(), id); at != ids.end()) {
      device.push_back(row.logits[j]);
      expected.push_back(values[static_cast<size_t>(at - ids.begin())]);
    }
  }
  Comparison c;
  c.cosine = device.empty() ? 0.0 : cosine(device, expected);
  c.gain = device.empty() ? 0.0 : gain(device, expected);
  c.rel_rms = device.empty() ? 1.0 : relative_rms_error(device, expected);
  for (size_t i = 0; i < device.size(); ++i) {
    const double error = std::fabs(double{device[i]} - double{expected[i]});
    if (!(error <= c.max_abs_error)) c.max_abs_error = error;  // a NaN is the worst
  }
  // Each of the device's best min(K, top_k) among the golden's top_k: with K >= top_k the
  // full row's overlap; with fewer, a near-tie swapped in at the K-th place from just below
  // is no miss (one swap would cost 1/K, and a small K could never pass the gate).
  const size_t k = std::min(row.ids.size(), ids.size());
  size_t hits = 0;
  for (size_t j = 0; j < k; ++j) {
    hits += std::find(ids.begin(), ids.end(), row.ids[j]) != ids.end() ? 1 : 0;
  }
  c.top_k_overlap = k == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(k);
  if (values.size() >= 2) c.golden_margin = double{values[0]} - double{values[1]};
  c.argmax = row.ids.front();
  c.expected_argmax = golden.greedy[step + 1];
  return c;
}

std::optional<Comparison> compare_contract_decode(const DecodeRow& row,
                                                  const calbin::GoldenCase& golden, uint64_t index,
                                                  uint32_t step, size_t vocab, size_t top_k_count) {
  const auto contract = contract_row(golden, index, vocab);
  if (!contract) {
    return std::nullopt;
  }
  if (!row.ranked()) {
    return compare_decode(*contract, golden, step, top_k_count);
  }
  return compare_decode(rank_like_device(*contract, row.ids.size()), golden, step, top_k_count);
}

Fp32Distance Fp32Distance::of(const Comparison& c) {
  return {.cosine = c.cosine,
          .max_abs_error = c.max_abs_error,
          .top_k_overlap = c.top_k_overlap,
          .gain_bias = std::abs(c.gain - 1.0),
          .rel_rms = c.rel_rms,
          .greedy = 1.0};
}

Fp32Distance Fp32Distance::of(const MetricSummary& m) {
  return {.cosine = m.cosine_min,
          .max_abs_error = m.max_abs_error_max,
          .top_k_overlap = m.top_k_overlap_min,
          .gain_bias = std::abs(m.mean_gain() - 1.0),
          .rel_rms = m.mean_rel_rms(),
          .greedy = m.greedy_rate()};
}

namespace {

double open_ceiling(double threshold, double reference, const Opening& o) {
  if (std::isnan(reference)) return threshold;  // a NaN reference opens nothing
  return std::max(threshold, std::min(o.ceiling, reference * o.scale + o.slack));
}

// The same for a "larger is better" gate with values up to 1 (cosine, overlap, agreement).
double open_floor(double threshold, double reference, const Opening& o) {
  if (std::isnan(reference)) return threshold;
  return std::min(threshold, 1.0 - std::min(o.ceiling, (1.0 - reference) * o.scale + o.slack));
}

// Over 64 seeds of five shapes, the device's mean relative RMS error is 0.993x - 1.007x the
// reference's over the same rows, its worst max abs error 0.85x - 1.25x, its worst 1 - cosine
// 0.85x - 1.12x; the rank measures drop at most one swap of the top 20 below the reference's,
// and open by two; the mean gain stays within 6.2e-5 of the reference's, and opens by 5e-4.
constexpr Opening kRelRms{1.1, 0.0, 0.15};
constexpr Opening kMaxAbs{1.5, 0.0, 4.0};
constexpr Opening kCosine{1.5, 0.0, 0.05};
constexpr Opening kTopK{1.0, 0.1, 0.5};
constexpr Opening kGainBias{1.0, 0.0005, 0.01};
constexpr Opening kGreedy{1.0, 0.05, 0.3};

}  // namespace

Fp32Openings fp32_openings() { return {kRelRms, kMaxAbs, kCosine, kTopK, kGainBias, kGreedy}; }

// A routed model's per-row gates: the same openings with no ceiling but the measure's own
// limit (calibration in runner/README.md, "Mixture of experts").
constexpr Opening uncapped(Opening o, double limit) { return {o.scale, o.slack, limit}; }

Thresholds scaled_by_reference(const Thresholds& t, const Fp32Distance& r) {
  Thresholds s = t;
  const bool routed = t.routed_model;
  s.max_mean_rel_rms = open_ceiling(t.max_mean_rel_rms, r.rel_rms, kRelRms);
  s.max_abs_error = open_ceiling(t.max_abs_error, r.max_abs_error,
                                 routed ? uncapped(kMaxAbs, HUGE_VAL) : kMaxAbs);
  s.min_cosine = open_floor(t.min_cosine, r.cosine, routed ? uncapped(kCosine, 2.0) : kCosine);
  s.min_top_k_overlap =
      open_floor(t.min_top_k_overlap, r.top_k_overlap, routed ? uncapped(kTopK, 1.0) : kTopK);
  s.max_gain_bias = open_ceiling(t.max_gain_bias, r.gain_bias, kGainBias);
  s.min_greedy = open_floor(t.min_greedy, r.greedy, kGreedy);
  return s;
}

RowJudgement judge_row(const Comparison& c, const Thresholds& gates,
                       const std::optional<Comparison>& reference) {
  const bool scaled = reference && gates.scale_fp32_gates;
  const Thresholds t = scaled ? scaled_by_reference(gates, Fp32Distance::of(*reference)) : gates;
  auto at_reference = [&](double value) {
    return scaled ? fmt::format(" (contract reference {:.6g})", value) : std::string();
  };
  std::vector<std::string> why;
  if (t.distribution_gated && !(c.cosine >= t.min_cosine)) {  // written so that NaN fails
    why.push_back(fmt::format("cosine {:.6f} < {:.6g}{}", c.cosine, t.min_cosine,
                              at_reference(scaled ? reference->cosine : 0.0)));
  }
  if (t.distribution_gated && !(c.max_abs_error <= t.max_abs_error)) {
    why.push_back(fmt::format("max abs error {:.5f} > {:.5g}{}", c.max_abs_error, t.max_abs_error,
                              at_reference(scaled ? reference->max_abs_error : 0.0)));
  }
  if (!(c.top_k_overlap >= t.min_top_k_overlap)) {
    why.push_back(fmt::format("top-k overlap {:.3f} < {:.3g}{}", c.top_k_overlap,
                              t.min_top_k_overlap,
                              at_reference(scaled ? reference->top_k_overlap : 0.0)));
  }
  RowJudgement judgement{std::move(why), std::nullopt};
  if (c.argmax != c.expected_argmax) {
    judgement.greedy_mismatch =
        fmt::format("argmax {} != golden greedy token {}", c.argmax, c.expected_argmax);
  }
  return judgement;
}

std::vector<std::string> RowJudgement::all() const {
  std::vector<std::string> sentences = failures;
  if (greedy_mismatch) sentences.push_back(*greedy_mismatch);
  return sentences;
}

namespace {

// The BF16 ULP at the row's largest |logit|. A row of zeros has no scale of its own: the
// smallest normal BF16 ULP stands in.
double contract_unit(std::span<const float> row) {
  float range = 0.0f;
  for (const float v : row) range = std::max(range, std::fabs(v));
  return range > 0.0f ? std::ldexp(1.0, std::ilogb(range) - 7) : std::ldexp(1.0, -133);
}

}  // namespace

std::string ContractComparison::worst() const {
  if (missing) {
    return fmt::format("logit {}: left out of the device's ranked candidates, contract {}",
                       worst_id, contract);
  }
  return fmt::format("logit {}: device {} vs contract {}", worst_id, device, contract);
}

ContractComparison compare_contract(const DecodeRow& row, std::span<const float> contract) {
  if (!row.ranked()) {
    return compare_contract(row.logits, contract);
  }
  ContractComparison c;
  const double unit = contract_unit(contract);
  std::vector<bool> given(contract.size(), false);
  double sum = 0.0;
  for (size_t j = 0; j < row.ids.size(); ++j) {
    const int32_t id = row.ids[j];
    if (id < 0 || static_cast<size_t>(id) >= contract.size()) {
      c.ulps = std::numeric_limits<double>::infinity();
      c.worst_id = id;
      c.device = row.logits[j];
      c.contract = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    given[static_cast<size_t>(id)] = true;
    const float expected = contract[static_cast<size_t>(id)];
    const double error = std::fabs(double{row.logits[j]} - double{expected}) / unit;
    sum += error;
    if (row.logits[j] != expected) ++c.differing;
    if (!(error <= c.ulps)) {
      c.ulps = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
      c.worst_id = id;
      c.device = row.logits[j];
      c.contract = expected;
      c.missing = false;
    }
  }
  // The bar a left-out token must not clear: the device's last value, or the contract's at
  // that id if lower, so that a device inflating its last candidate does not hide a drop.
  double last = row.logits.empty() ? 0.0 : double{row.logits.back()};
  if (!row.ids.empty() && row.ids.back() >= 0 &&
      static_cast<size_t>(row.ids.back()) < contract.size()) {
    last = std::min(last, double{contract[static_cast<size_t>(row.ids.back())]});
  }
  for (size_t id = 0; id < contract.size(); ++id) {
    const double above = (double{contract[id]} - last) / unit;
    if (!given[id] && above > c.ulps) {
      c.ulps = above;
      c.worst_id = static_cast<int32_t>(id);
      c.device = static_cast<float>(last);
      c.contract = contract[id];
      c.missing = true;
    }
  }
  c.mean_ulps = row.ids.empty() ? 0.0 : sum / static_cast<double>(row.ids.size());
  return c;
}

ContractComparison compare_contract(std::span<const float> logits, std::span<const float> row) {
  ContractComparison c;
  if (logits.size() != row.size()) {
    throw std::out_of_range(
        fmt::format("logits row of {} against a contract row of {}", logits.size(), row.size()));
  }
  const double unit = contract_unit(row);
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

std::optional<std::span<const float>> contract_row(const calbin::GoldenCase& golden, uint64_t index,
                                                   size_t width) {
  const std::optional<size_t> at = contract_row_at(golden, index);
  if (!at || (*at + 1) * width > golden.contract_logits.size()) {
    return std::nullopt;
  }
  return std::span<const float>(golden.contract_logits).subspan(*at * width, width);
}

std::optional<size_t> first_divergent_point(const std::vector<double>& mean_errors) {
  for (size_t p = 0; p < mean_errors.size(); ++p) {
    if (!(mean_errors[p] == 0.0)) return p;
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

std::string ProbeSummary::describe(bool logits_differ) const {
  if (rows == 0) {
    return "layer probes unavailable: " + (unavailable.empty() ? "none compared" : unavailable);
  }
  const std::vector<double> means = mean_errors();
  if (const auto first = first_divergent_point(means)) {
    return fmt::format(
        "first difference from the contract: {} (mean relative error {:.3g} over {} rows; "
        "equal before it)",
        probe_point_name(*first), means[*first], rows);
  }
  if (logits_differ) {
    return fmt::format(
        "the residual stream equals the contract after every layer ({} rows): the difference "
        "comes after the last layer (final norm, lm_head, logits output)",
        rows);
  }
  return fmt::format(
      "the device equals the contract at every layer and in every logit of the {} rows "
      "compared: it computes its declared numerics exactly there, so an FP32 gate's failure on "
      "them is the numerics' own accuracy at this shape, not a device defect",
      rows);
}

std::string probe_point_name(size_t point) {
  if (point == 0) return "embedding";
  return fmt::format("layer {} {}", (point - 1) / 2, point % 2 == 1 ? "attention" : "MLP");
}

uint32_t kv_tokens_for(const calbin::GoldenCase& golden, uint32_t context) {
  return std::min(context, golden.prompt_len + std::max(golden.decode_steps, 1u));
}

}  // namespace runner
