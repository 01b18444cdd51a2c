#include "runner/core/decode_row.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "runner/core/metrics.hpp"
#include "runner/core/session.hpp"
#include "runner/core/tensor_io.hpp"

namespace runner {
namespace {

// The device's order: larger first, NaN after every number, equal values by id.
bool ranks_before(float a, int32_t a_id, float b, int32_t b_id) {
  const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return a > b;
  return a_id < b_id;
}

}  // namespace

int32_t DecodeRow::best() const {
  return ranked() ? ids.front() : pick ? pick->argmax : argmax(logits);
}

std::vector<DecodeRow> read_decode_rows(const ModelIo& io, calrt::Buffer& output, size_t rows,
                                        calrt::Timeout timeout) {
  std::vector<DecodeRow> out(rows);
  if (!io.ranked()) {
    const calrt::Mapping map = output.map(io.logits_output, timeout);
    for (size_t r = 0; r < rows; ++r) out[r].logits = read_row_f32(map.bytes(), io.logits(), r);
    return out;
  }
  const size_t k = io.top_k;
  {
    const calrt::Mapping map = output.map(io.top_ids_output, timeout);
    if (map.bytes().size() < rows * k * sizeof(int32_t)) {
      throw std::runtime_error(
          fmt::format("tensor {}: mapped {} bytes, too few for {} rows of {} ids",
                      io.top_ids().name, map.bytes().size(), rows, k));
    }
    for (size_t r = 0; r < rows; ++r) {
      out[r].ids.resize(k);
      std::memcpy(out[r].ids.data(), map.bytes().data() + r * k * sizeof(int32_t),
                  k * sizeof(int32_t));
    }
  }
  const calrt::Mapping map = output.map(io.top_logits_output, timeout);
  for (size_t r = 0; r < rows; ++r) out[r].logits = read_row_f32(map.bytes(), io.top_logits(), r);
  return out;
}

DecodeRow read_decode_row(ModelIo& io, calrt::Timeout timeout) {
  return std::move(read_decode_rows(io, io.output, 1, timeout).front());
}

std::string ranked_row_defect(const DecodeRow& row, size_t vocab) {
  std::vector<bool> seen(vocab, false);
  for (size_t j = 0; j < row.ids.size(); ++j) {
    const int32_t id = row.ids[j];
    if (id < 0 || static_cast<size_t>(id) >= vocab) {
      return fmt::format("ranked candidate {} is id {}, outside the vocabulary of {}", j, id,
                         vocab);
    }
    if (seen[static_cast<size_t>(id)]) {
      return fmt::format("ranked candidate {} repeats id {}", j, id);
    }
    seen[static_cast<size_t>(id)] = true;
    if (j > 0 && !ranks_before(row.logits[j - 1], row.ids[j - 1], row.logits[j], id)) {
      return fmt::format(
          "ranked candidates {} and {} are out of order: id {} ({}) before id {} ({})", j - 1, j,
          row.ids[j - 1], row.logits[j - 1], id, row.logits[j]);
    }
  }
  return {};
}

DecodeRow rank_like_device(std::span<const float> full, size_t k) {
  std::vector<int32_t> order(full.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t kept = std::min(k, full.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kept), order.end(),
                    [&](int32_t a, int32_t b) {
                      return ranks_before(full[static_cast<size_t>(a)], a,
                                          full[static_cast<size_t>(b)], b);
                    });
  DecodeRow out;
  for (size_t j = 0; j < kept; ++j) {
    out.ids.push_back(order[j]);
    out.logits.push_back(full[static_cast<size_t>(order[j])]);
  }
  return out;
}

}  // namespace runner
