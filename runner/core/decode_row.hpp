// One decode row as the device gave it: the full logits row, or, for a decode that ranks on
// the device (calrt.h, CALRT_ROLE_TOP_IDS), its K best ids and their logits. The smoke and
// the scenarios compare either kind through the same calls (golden_compare.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "abi/calrt.hpp"
#include "runner/core/tensor_io.hpp"

namespace runner {

struct ModelIo;

struct DecodeRow {
  std::vector<float> logits;  // full: the vocabulary's values; ranked: the K values, best first
  std::vector<int32_t> ids;   // ranked: the K ids; empty for a full row
  // A full row read with read_row_pick: its argmax and top k, ranked while it was converted,
  // so that the comparison does not read the row twice more.
  std::optional<RowPick> pick;

  bool ranked() const { return !ids.empty(); }
  // The greedy token: the first id, or the row's argmax (lowest id on ties, NaN never).
  int32_t best() const;
};

// Rows [0, rows) of `output`, a buffer of `io`'s model, mapped once within `timeout`: the
// logits rows, or the ranked ids and values when the model ranks on the device. Throws
// std::runtime_error when the mapping is too small for them.
std::vector<DecodeRow> read_decode_rows(const ModelIo& io, calrt::Buffer& output, size_t rows,
                                        calrt::Timeout timeout);
// Row 0 of the model's own output buffer.
DecodeRow read_decode_row(ModelIo& io, calrt::Timeout timeout);

// What is wrong with a ranked row against the ABI's promise (ids inside the vocabulary, none
// twice, values best first, equal values in increasing id order); empty when nothing is.
std::string ranked_row_defect(const DecodeRow& row, size_t vocab);

// `full`'s K best entries as the device is to rank them (value, then id; NaN last): the
// contract reference's row in the device's terms.
DecodeRow rank_like_device(std::span<const float> full, size_t k);

}  // namespace runner
