// Host-side conversion between logical tensors and a mapped buffer's physical bytes.
//
// The layout always comes from the tensor descriptor: row-major, or tiled with the
// descriptor's tile_d0 (calbin/layout.hpp). Hard-coding the tile size (16 in today's
// calbins) is the old adapter's known defect; nothing here assumes it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "abi/calrt.hpp"

namespace calrt::llm {

// A descriptor's logical shape folded to [rows, cols] (leading dims into rows), and the
// element count its physical layout holds. Throws std::runtime_error naming the tensor
// when the descriptor is inconsistent (rank 0, a negative dim, tiled without tile_d0, or
// bytes that do not match the shape, dtype and layout).
struct Matrix2d {
  size_t rows = 0;
  size_t cols = 0;
  size_t physical_elements = 0;
};
Matrix2d physical_shape(const calrt::TensorDesc& desc);

// Bytes per element of the dtypes this runner reads or writes (int32, bf16, f32); throws
// for the others.
size_t element_bytes(calrt::Dtype dtype);

// Reads logical row `row` of a bf16 or f32 tensor as FP32 (BF16 -> FP32 is exact).
std::vector<float> read_row_f32(std::span<const std::byte> mapped, const calrt::TensorDesc& desc,
                                size_t row = 0);

// The same into `out`, which must hold exactly the row's columns (std::runtime_error
// otherwise). Allocates nothing, so a decode loop can reuse one buffer per step.
void read_row_f32_into(std::span<const std::byte> mapped, const calrt::TensorDesc& desc, size_t row,
                       std::span<float> out);

// The greedy token and the top-k candidates of a logits row.
struct RowPick {
  int32_t argmax = -1;
  std::vector<int32_t> top_k;  // largest first; empty for k = 0
};

// read_row_f32_into, argmax and top_k(out, k) without reading the row back: a row in one run
// is converted in a pass that also takes each block's maximum, whose k-th largest is a floor
// no ranked value is below, and only the few blocks reaching it are ranked; other rows are
// ranked piece by piece (RowRanker, metrics.hpp) right after each piece is converted, while
// it is still in L1. The same checks, exceptions and results (bit for bit, ties and NaNs
// included) as the three calls one after the other.
RowPick read_row_pick(std::span<const std::byte> mapped, const calrt::TensorDesc& desc, size_t row,
                      std::span<float> out, size_t k);

// argmax and top_k of the row with no FP32 row written: for a step that only ranks (greedy
// or top-k sampling, which needs the k values only). The BF16 row is read once for its block
// maxima, then only the blocks reaching their floor are read again; a row the floor does not
// suit (+inf or NaNs, a top at or below zero, a strided tiled row) is read once with each
// block tested against the ranking's bound in registers. Nothing row-sized is written. The
// same results as read_row_pick, bit for bit; a row with fewer numbers than k (NaNs rank last,
// by id) is converted whole to place them.
RowPick rank_row(std::span<const std::byte> mapped, const calrt::TensorDesc& desc, size_t row,
                 size_t k);

// The stored bytes of a logical row in column order, run by run (a tiled layout splits a row
// into runs), for a fingerprint of exactly what the device wrote; `cols` is the row's length.
// The same checks and exceptions as read_row_f32_into.
void visit_row_bytes(std::span<const std::byte> mapped, const calrt::TensorDesc& desc, size_t row,
                     size_t cols, const std::function<void(std::span<const std::byte>)>& visit);

// Writes `values` into logical row 0 of an int32 tensor and zeroes everything else (other
// rows, the row's tail, tiling padding).
void write_row_i32(std::span<std::byte> mapped, const calrt::TensorDesc& desc,
                   std::span<const int32_t> values);
// Writes values[r] into logical element (r, 0) of an int32 tensor, one per row (a batch
// decode's tokens or positions, [batch, 1]), and zeroes everything else.
void write_column_i32(std::span<std::byte> mapped, const calrt::TensorDesc& desc,
                      std::span<const int32_t> values);

}  // namespace calrt::llm
