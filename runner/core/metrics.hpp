// Numeric comparison of device logits with golden logits (stage 11 metrics): cosine, max
// absolute error at chosen ids, top-k overlap and argmax. All computed in double so that
// the metric itself adds no error worth mentioning next to BF16 logits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "llm/host/ranking.hpp"

namespace runner {

// Cosine similarity of two equally long vectors. Two all-zero vectors are identical (1);
// one all-zero vector against a non-zero one gives 0. A NaN anywhere gives NaN, which
// fails every ">= threshold" test.
double cosine(std::span<const float> a, std::span<const float> b);

// The least-squares gain of actual over expected, <a, e> / <e, e>: 1 when the device keeps
// the logits' scale. Cosine cannot see a scale error; this can. NaN for an all-zero or NaN
// reference.
double gain(std::span<const float> actual, std::span<const float> expected);

// ||actual - expected|| / ||expected|| (Euclidean). NaN for an all-zero or NaN reference.
double relative_rms_error(std::span<const float> actual, std::span<const float> expected);

// max |actual[id] - expected[id]| over `ids`; over every element when ids is empty.
double max_abs_error(std::span<const float> actual, std::span<const float> expected,
                     std::span<const int32_t> ids = {});

// The same where expected values are given per id (golden top_logits): max over i of
// |actual[ids[i]] - expected_at_ids[i]|.
double max_abs_error_at(std::span<const float> actual, std::span<const int32_t> ids,
                        std::span<const float> expected_at_ids);

// |a ∩ b| / |b|: the fraction of the reference ids `b` that `a` also contains. 1 for an
// empty reference.
double top_k_overlap(std::span<const int32_t> a, std::span<const int32_t> b);

// argmax, top_k and RowRanker live in llm/host/ranking.hpp (the adapter library ranks
// with them too); the runner names them as its own.
using calrt::llm::argmax;
using calrt::llm::RowRanker;
using calrt::llm::top_k;

// Running aggregates over every comparison of a smoke run (or one of its phases).
struct MetricSummary {
  double cosine_min = 1.0;
  double max_abs_error_max = 0.0;
  double top_k_overlap_min = 1.0;
  // Sums for the run-level means: noise averages out over many rows, a systematic error
  // (a scale, a wrong eps, coarser quantisation) does not.
  double gain_sum = 0.0;
  double rel_rms_sum = 0.0;
  double rel_rms_max = 0.0;
  // Greedy over decisive comparisons only: those whose golden top-1 margin exceeds the tie
  // margin. Near-ties are counted apart: W8A8 noise may swap them on a correct device.
  uint64_t greedy_agree = 0;
  uint64_t greedy_total = 0;
  uint64_t near_ties = 0;
  uint64_t near_tie_swaps = 0;
  uint64_t compared = 0;  // comparisons folded in

  void add(double cosine_value, double max_abs_error_value, double top_k_overlap_value);
  void add_bias(double gain_value, double rel_rms_value);
  void add_greedy(bool agree, bool decisive = true);
  void merge(const MetricSummary& other);
  double greedy_rate() const;   // 1 when nothing was compared
  double mean_gain() const;     // 1 when nothing was compared
  double mean_rel_rms() const;  // 0 when nothing was compared
};

}  // namespace runner
