// Numeric comparison of device logits with golden logits (stage 11 metrics): cosine, max
// absolute error at chosen ids, top-k overlap and argmax. All computed in double so that
// the metric itself adds no error worth mentioning next to BF16 logits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

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

// The ids of the k largest values, largest first; ties go to the lower id. NaNs rank last.
std::vector<int32_t> top_k(std::span<const float> values, size_t k);

// |a ∩ b| / |b|: the fraction of the reference ids `b` that `a` also contains. 1 for an
// empty reference.
double top_k_overlap(std::span<const int32_t> a, std::span<const int32_t> b);

// The id of the largest value; the lowest id on ties; -1 for an empty span. NaNs never win.
int32_t argmax(std::span<const float> values);

// argmax and top_k of a row whose values arrive in consecutive pieces, so that a producer
// (read_row_pick in tensor_io.hpp) can rank each piece while it is still in cache instead of
// reading the whole row again. The state evolves exactly as in one top_k scan, whatever the
// piece boundaries, so the results equal argmax(row) and top_k(row, k) bit for bit.
namespace detail {
// A candidate of top_k (metrics.cpp ranks them).
struct RankedValue {
  float value;
  int32_t id;
};
}  // namespace detail

class RowRanker {
 public:
  explicit RowRanker(size_t k);
  // The row's next values; their ids continue from the previous piece's.
  void add(std::span<const float> values);
  // A value not greater than this (NaN included) cannot change the result; empty while any
  // number still can (fewer than max(k, 1) numbers seen). It only rises.
  std::optional<float> bound() const {
    return best_.size() == capacity_ ? std::optional<float>(best_.front().value) : std::nullopt;
  }
  // Equivalent to add() of `count` values none of which is greater than bound(), which must
  // not be empty: lets a producer that has tested them itself (a conversion loop) skip the
  // scan.
  void skip(size_t count) { seen_ += count; }
  // Equivalent to add() of one value: for a producer that tests values itself and offers
  // only the few that may rank.
  void add_one(float value);
  // After the last piece. -1 when nothing was added.
  int32_t argmax() const;
  // After the last piece; `row` must be every value added, in order (the NaNs' ids are looked
  // up in it when fewer than k values are numbers).
  std::vector<int32_t> top_k(std::span<const float> row) const;
  // The same when at least k numbers were added (bound() is set, or k is 0): the row is not
  // needed then.
  std::vector<int32_t> top_k_of_numbers() const;

 private:
  size_t k_;
  // Candidates kept: k, but at least 1, since argmax is the best of them.
  size_t capacity_;
  size_t seen_ = 0;
  std::vector<detail::RankedValue> best_;  // a heap (ranking last on top) once it holds capacity_
};

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
