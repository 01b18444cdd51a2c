// Ranking a logits row: argmax and top-k by one rule (larger value first, lower id on ties,
// NaNs last), whole or piece by piece. The sampler, the row readers (tensor_io.hpp) and the
// runner's comparison metrics all rank through these, so a token picked anywhere is the same
// token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace calrt::llm {

// The ids of the k largest values, largest first; ties go to the lower id. NaNs rank last.
std::vector<int32_t> top_k(std::span<const float> values, size_t k);

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

}  // namespace calrt::llm
