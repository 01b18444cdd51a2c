// Numeric comparison of device logits with golden logits (stage 11 metrics): cosine, max
// absolute error at chosen ids, top-k overlap and argmax. All computed in double so that
// the metric itself adds no error worth mentioning next to BF16 logits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace runner {

// Cosine similarity of two equally long vectors. Two all-zero vectors are identical (1);
// one all-zero vector against a non-zero one gives 0. A NaN anywhere gives NaN, which
// fails every ">= threshold" test.
double cosine(std::span<const float> a, std::span<const float> b);

// max |actual[id] - expected[id]| over `ids`; over every element when ids is empty.
double max_abs_error(std::span<const float> actual, std::span<const float> expected,
                     std::span<const int32_t> ids = {});

// The same where expected values are given per id (golden top_logits): max over i of
// |actual[ids[i]] - expected_at_ids[i]|.
double max_abs_error_at(std::span<const float> actual, std::span<const int32_t> ids,
                        std::span<const float> expected_at_ids);

// The ids of the k largest values, largest first; ties go to the lower id. NaNs rank last.
std::vector<int32_t> top_k(std::span<const float> values, size_t k);

// |a ∩ b| / |b|: the fraction of the reference ids `b` that `a` also contains. 1 for an
// empty reference.
double top_k_overlap(std::span<const int32_t> a, std::span<const int32_t> b);

// The id of the largest value; the lowest id on ties; -1 for an empty span. NaNs never win.
int32_t argmax(std::span<const float> values);

// Running aggregates over every comparison of a smoke run (or one of its phases).
struct MetricSummary {
  double cosine_min = 1.0;
  double max_abs_error_max = 0.0;
  double top_k_overlap_min = 1.0;
  uint64_t greedy_agree = 0;  // argmax equal to the golden greedy token
  uint64_t greedy_total = 0;
  uint64_t compared = 0;  // comparisons folded in

  void add(double cosine_value, double max_abs_error_value, double top_k_overlap_value);
  void add_greedy(bool agree);
  void merge(const MetricSummary& other);
  double greedy_rate() const;  // 1 when nothing was compared
};

}  // namespace runner
