// runner/tensor_io: layout conversion driven by the descriptor's tile_d0, BF16 -> FP32,
// descriptor consistency errors, and the fused read_row_pick against the separate passes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "calbin/bf16.hpp"
#include "calbin/layout.hpp"
#include "runner/core/metrics.hpp"
#include "runner/core/tensor_io.hpp"

namespace {

calrt::TensorDesc logits_desc(int64_t rows, int64_t cols, uint32_t tile_d0) {
  calrt::TensorDesc d;
  d.name = "logits";
  d.dtype = calrt::Dtype::bf16;
  d.shape = {rows, cols};
  d.layout = tile_d0 > 0 ? calrt::Layout::tiled : calrt::Layout::row_major;
  d.tile_d0 = tile_d0;
  const size_t elements = tile_d0 > 0 ? calbin::tiled_element_count(rows, cols, tile_d0)
                                      : static_cast<size_t>(rows * cols);
  d.bytes = elements * 2;
  return d;
}

// Physical bytes of a tiled bf16 tensor whose logical value at (r, c) is r * 100 + c.
std::vector<std::byte> tiled_bytes(size_t rows, size_t cols, uint32_t d0) {
  std::vector<uint16_t> logical(rows * cols);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      logical[r * cols + c] = calbin::f32_to_bf16(static_cast<float>(r * 100 + c));
    }
  }
  std::vector<uint16_t> physical(d0 > 0 ? calbin::tiled_element_count(rows, cols, d0)
                                        : rows * cols);
  calbin::to_physical(logical.data(), physical.data(), rows, cols, d0);
  std::vector<std::byte> bytes(physical.size() * 2);
  std::memcpy(bytes.data(), physical.data(), bytes.size());
  return bytes;
}

class TileSizes : public ::testing::TestWithParam<uint32_t> {};

TEST_P(TileSizes, ReadsEveryRowWithTheDescriptorsTile) {
  const uint32_t d0 = GetParam();
  const calrt::TensorDesc desc = logits_desc(3, 37, d0);  // 37: a partial last tile
  const auto bytes = tiled_bytes(3, 37, d0);
  for (size_t row = 0; row < 3; ++row) {
    const std::vector<float> out = runner::read_row_f32(bytes, desc, row);
    ASSERT_EQ(out.size(), 37u);
    for (size_t c = 0; c < 37; ++c) {
      EXPECT_EQ(out[c], static_cast<float>(row * 100 + c)) << "d0 " << d0 << " col " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, TileSizes, ::testing::Values(0u, 4u, 8u, 16u, 32u));

// Long rows take the vectorised path in blocks of 16 plus a scalar tail; every layout, tile
// size and row must still give exactly the values the layout formula says.
TEST(TensorIo, IntoMatchesTheLayoutFormulaOnLongRows) {
  for (const uint32_t d0 : {0u, 4u, 12u, 16u, 32u}) {
    for (const size_t rows : {size_t{1}, size_t{3}}) {
      const size_t cols = 1000 + 7;  // a partial last tile and a tail after the 16-blocks
      const calrt::TensorDesc desc = logits_desc(static_cast<int64_t>(rows), cols, d0);
      const auto bytes = tiled_bytes(rows, cols, d0);
      for (size_t row = 0; row < rows; ++row) {
        std::vector<float> out(cols, -1.0f);
        runner::read_row_f32_into(bytes, desc, row, out);
        for (size_t c = 0; c < cols; ++c) {
          ASSERT_EQ(out[c], calbin::round_to_bf16(static_cast<float>(row * 100 + c)))
              << "d0 " << d0 << " rows " << rows << " row " << row << " col " << c;
        }
        EXPECT_EQ(runner::read_row_f32(bytes, desc, row), out);
      }
    }
  }
}

TEST(TensorIo, IntoReadsAnUnalignedMapping) {
  const calrt::TensorDesc desc = logits_desc(1, 100, 16);
  const auto bytes = tiled_bytes(1, 100, 16);
  std::vector<std::byte> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  std::vector<float> out(100);
  runner::read_row_f32_into(std::span<const std::byte>(shifted).subspan(1), desc, 0, out);
  EXPECT_EQ(out, runner::read_row_f32(bytes, desc, 0));
}

TEST(TensorIo, IntoReadsF32Tensors) {
  calrt::TensorDesc desc = logits_desc(2, 20, 8);
  desc.dtype = calrt::Dtype::f32;
  desc.bytes = calbin::tiled_element_count(2, 20, 8) * sizeof(float);
  std::vector<float> logical(2 * 20);
  for (size_t i = 0; i < logical.size(); ++i) {
    logical[i] = 0.25f + static_cast<float>(i);
  }
  std::vector<float> physical(calbin::tiled_element_count(2, 20, 8), 0.0f);
  calbin::to_physical(logical.data(), physical.data(), 2, 20, 8);
  std::vector<std::byte> bytes(desc.bytes);
  std::memcpy(bytes.data(), physical.data(), bytes.size());
  std::vector<float> out(20);
  runner::read_row_f32_into(bytes, desc, 1, out);
  EXPECT_EQ(out, std::vector<float>(logical.begin() + 20, logical.end()));
}

TEST(TensorIo, IntoRejectsAWrongOutputSizeAndBadRows) {
  const calrt::TensorDesc desc = logits_desc(2, 37, 16);
  const auto bytes = tiled_bytes(2, 37, 16);
  std::vector<float> short_out(36);
  EXPECT_THROW(runner::read_row_f32_into(bytes, desc, 0, short_out), std::runtime_error);
  std::vector<float> long_out(38);
  EXPECT_THROW(runner::read_row_f32_into(bytes, desc, 0, long_out), std::runtime_error);
  std::vector<float> out(37);
  EXPECT_THROW(runner::read_row_f32_into(bytes, desc, 2, out), std::runtime_error);
  calrt::TensorDesc int_desc = desc;
  int_desc.dtype = calrt::Dtype::int32;
  int_desc.bytes = desc.bytes * 2;
  std::vector<std::byte> int_bytes(int_desc.bytes);
  EXPECT_THROW(runner::read_row_f32_into(int_bytes, int_desc, 0, out), std::runtime_error);
}

TEST(TensorIo, AssumingTile16OnATile8TensorWouldBeWrong) {
  // The old adapter's defect: reading a d0 = 8 tensor as if it had d0 = 16.
  const auto bytes = tiled_bytes(2, 32, 8);
  calrt::TensorDesc wrong = logits_desc(2, 32, 16);
  const std::vector<float> out = runner::read_row_f32(bytes, wrong, 0);
  EXPECT_NE(out[8], 8.0f);
}

TEST(TensorIo, InconsistentDescriptorsAreErrors) {
  calrt::TensorDesc desc = logits_desc(1, 10, 16);
  desc.bytes = 20;  // the tiled size is 32
  EXPECT_THROW(runner::physical_shape(desc), std::runtime_error);
  desc = logits_desc(1, 10, 16);
  desc.tile_d0 = 0;  // tiled without a tile size
  EXPECT_THROW(runner::physical_shape(desc), std::runtime_error);
  desc = logits_desc(1, 10, 0);
  std::vector<std::byte> short_map(4);
  EXPECT_THROW(runner::read_row_f32(short_map, desc), std::runtime_error);
}

// A row-major int32 "tokens" tensor of rows x cols.
calrt::TensorDesc int32_tokens(int64_t rows, int64_t cols) {
  calrt::TensorDesc desc;
  desc.name = "tokens";
  desc.dtype = calrt::Dtype::int32;
  desc.shape = {rows, cols};
  desc.bytes = static_cast<uint64_t>(rows * cols) * sizeof(int32_t);
  return desc;
}

TEST(TensorIo, WritesRowZeroAndZeroesTheRest) {
  const calrt::TensorDesc desc = int32_tokens(1, 6);
  std::vector<std::byte> bytes(24, std::byte{0xFF});
  const std::vector<int32_t> values = {7, 8, 9};
  runner::write_row_i32(bytes, desc, values);
  int32_t out[6];
  std::memcpy(out, bytes.data(), sizeof(out));
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[2], 9);
  EXPECT_EQ(out[3], 0);
  EXPECT_EQ(out[5], 0);
  const std::vector<int32_t> too_many(7, 1);
  EXPECT_THROW(runner::write_row_i32(bytes, desc, too_many), std::runtime_error);
}

// A batch decode's tokens, [batch, 1]: one value per row, the rest zero; more values than
// rows is refused naming the tensor.
TEST(TensorIo, WritesAColumnAndZeroesTheRest) {
  const calrt::TensorDesc desc = int32_tokens(4, 1);
  std::vector<std::byte> bytes(16, std::byte{0xFF});
  runner::write_column_i32(bytes, desc, std::vector<int32_t>{5, 6});
  int32_t out[4];
  std::memcpy(out, bytes.data(), sizeof(out));
  EXPECT_EQ(out[0], 5);
  EXPECT_EQ(out[1], 6);
  EXPECT_EQ(out[2], 0);
  EXPECT_EQ(out[3], 0);
  try {
    runner::write_column_i32(bytes, desc, std::vector<int32_t>(5, 1));
    ADD_FAILURE() << "five values for four rows were written";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("tokens"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("5 values for a column of 4"), std::string::npos)
        << error.what();
  }
}

// ---------------------------------------------------------------------------------------
// read_row_pick and rank_row: must give exactly what read_row_f32_into + argmax + top_k give.
// ---------------------------------------------------------------------------------------

// Physical bf16 bytes of `rows` x `cols` logical values made by value(row, col).
std::vector<std::byte> bf16_bytes(size_t rows, size_t cols, uint32_t d0,
                                  const std::function<float(size_t, size_t)>& value) {
  std::vector<uint16_t> logical(rows * cols);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      logical[r * cols + c] = calbin::f32_to_bf16(value(r, c));
    }
  }
  std::vector<uint16_t> physical(d0 > 0 ? calbin::tiled_element_count(rows, cols, d0)
                                        : rows * cols);
  calbin::to_physical(logical.data(), physical.data(), rows, cols, d0);
  std::vector<std::byte> bytes(physical.size() * 2);
  std::memcpy(bytes.data(), physical.data(), bytes.size());
  return bytes;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every row, for several k (0, 1, around the piece size, beyond the row), both ways.
void expect_pick_matches(const std::string& name, size_t rows, size_t cols, uint32_t d0,
                         const std::function<float(size_t, size_t)>& value) {
  const calrt::TensorDesc desc = logits_desc(static_cast<int64_t>(rows), cols, d0);
  const auto bytes = bf16_bytes(rows, cols, d0, value);
  for (size_t row = 0; row < rows; ++row) {
    std::vector<float> expected(cols);
    runner::read_row_f32_into(bytes, desc, row, expected);
    for (const size_t k :
         {size_t{0}, size_t{1}, size_t{2}, size_t{40}, size_t{257}, cols, cols + 5}) {
      SCOPED_TRACE(name + ": " + std::to_string(rows) + " x " + std::to_string(cols) + " d0 " +
                   std::to_string(d0) + " row " + std::to_string(row) + " k " + std::to_string(k));
      std::vector<float> out(cols, -1.0f);
      const runner::RowPick pick = runner::read_row_pick(bytes, desc, row, out, k);
      ASSERT_TRUE(same_bits(out, expected));
      EXPECT_EQ(pick.argmax, runner::argmax(expected));
      EXPECT_EQ(pick.top_k, runner::top_k(expected, k));
      // rank_row: the same ranking with no FP32 row written.
      const runner::RowPick ranked = runner::rank_row(bytes, desc, row, k);
      EXPECT_EQ(ranked.argmax, runner::argmax(expected));
      EXPECT_EQ(ranked.top_k, runner::top_k(expected, k));
    }
  }
}

TEST(TensorIoPick, MatchesTheSeparatePassesOnAdversarialRows) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Shapes: shorter than a scan block, one piece, several pieces with a tail; 1 row (one run)
  // and 3 rows (a strided tiled row, pieces gathered from many tiles). A row of one run with
  // at least k blocks of 256 values is ranked in two passes (a floor from the block maxima),
  // for every k up to 257 in the longest row, for k <= 2 in the 9001-value one.
  const std::vector<std::pair<size_t, size_t>> shapes = {{1, 5},    {1, 37},   {3, 37},   {1, 4096},
                                                         {1, 9001}, {3, 9001}, {1, 70001}};
  for (const uint32_t d0 : {0u, 4u, 16u, 32u}) {
    for (const auto& shape : shapes) {
      // Named copies, not structured bindings: clang 14 cannot capture those in a lambda.
      const auto rows = shape.first;
      const auto cols = shape.second;
      std::mt19937_64 rng(d0 * 1000 + cols + rows);
      std::normal_distribution<float> normal(0.0f, 3.0f);
      // N(0, 3) rounded to BF16: many exact ties, the top ones included.
      std::vector<float> random(rows * cols);
      for (float& v : random) {
        v = normal(rng);
      }
      expect_pick_matches("random", rows, cols, d0,
                          [&](size_t r, size_t c) { return random[r * cols + c]; });
      // Few distinct values: ties everywhere, at the top and at the k-th place.
      expect_pick_matches("ties", rows, cols, d0,
                          [](size_t r, size_t c) { return static_cast<float>((r + c * 7) % 5); });
      // NaNs, +inf and -inf scattered among random values, signed zeros.
      expect_pick_matches("nan inf", rows, cols, d0, [&](size_t r, size_t c) {
        const size_t i = r * cols + c;
        return i % 11 == 0   ? nan
               : i % 97 == 5 ? inf
               : i % 13 == 1 ? -inf
               : i % 17 == 2 ? -0.0f
               : i % 19 == 3 ? 0.0f
                             : random[i];
      });
      // Signed zeros tying at the top (-0 ranks with +0 by id, though rank_row's 16-bit order
      // key puts it lower), and negatives with -inf below them.
      // -0 only in the first half of the row, +0 in the second: the first half's zeros come
      // first by id.
      expect_pick_matches("signed zeros", rows, cols, d0, [=](size_t r, size_t c) {
        const float zero = c < cols / 2 ? -0.0f : 0.0f;
        return (r + c) % 2 == 0 ? zero : -1.0f;
      });
      expect_pick_matches("negatives", rows, cols, d0, [&](size_t r, size_t c) {
        const size_t i = r * cols + c;
        return i % 13 == 1 ? -inf : -std::abs(random[i]);
      });
      expect_pick_matches("all NaN", rows, cols, d0, [&](size_t, size_t) { return nan; });
      expect_pick_matches("all -inf", rows, cols, d0, [&](size_t, size_t) { return -inf; });
      // Fewer numbers than k: the NaNs fill the tail of top_k, lowest id first.
      expect_pick_matches("mostly NaN", rows, cols, d0, [&](size_t r, size_t c) {
        return (r + c) % 200 == 3 ? static_cast<float>(c % 7) : nan;
      });
      // The maximum first, last, and repeated at a piece boundary.
      expect_pick_matches("edges", rows, cols, d0, [&](size_t, size_t c) {
        return c == 0 || c + 1 == cols || c == 4095 || c == 4096 ? 100.0f : random[c];
      });
    }
  }
}

// The two-pass ranking's floor depends on the row's block maxima: a sweep of seeds, lengths,
// k and value distributions (logits-like, all positive, heavy-tailed, coarse with ties at
// every place, a few large values among negatives), each compared with top_k of the row.
TEST(TensorIoPick, RankingMatchesTopKOverSeedsLengthsAndDistributions) {
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    std::mt19937_64 rng(seed);
    const size_t cols = std::uniform_int_distribution<size_t>(256, 160000)(rng);
    std::normal_distribution<float> logits(0.0f, 3.0f);
    std::normal_distribution<float> positive(8.0f, 1.0f);
    std::exponential_distribution<float> heavy(0.5f);
    std::uniform_int_distribution<int> coarse(0, 12);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    const int kind = static_cast<int>(seed % 5);
    std::vector<float> row(cols);
    for (float& v : row) {
      v = kind == 0   ? logits(rng)
          : kind == 1 ? positive(rng)
          : kind == 2 ? heavy(rng)
          : kind == 3 ? static_cast<float>(coarse(rng)) / 4.0f
                      : (unit(rng) < 0.001f ? 50.0f * unit(rng) : -unit(rng));
    }
    for (const uint32_t d0 : {0u, 16u}) {
      const calrt::TensorDesc desc = logits_desc(1, cols, d0);
      const auto bytes = bf16_bytes(1, cols, d0, [&](size_t, size_t c) { return row[c]; });
      std::vector<float> expected(cols);
      runner::read_row_f32_into(bytes, desc, 0, expected);
      for (const size_t k : {size_t{0}, size_t{1}, size_t{40}, size_t{64}, size_t{600}}) {
        SCOPED_TRACE("seed " + std::to_string(seed) + " cols " + std::to_string(cols) + " d0 " +
                     std::to_string(d0) + " k " + std::to_string(k));
        const std::vector<int32_t> top = runner::top_k(expected, k);
        const runner::RowPick ranked = runner::rank_row(bytes, desc, 0, k);
        EXPECT_EQ(ranked.argmax, runner::argmax(expected));
        EXPECT_EQ(ranked.top_k, top);
        std::vector<float> out(cols);
        const runner::RowPick pick = runner::read_row_pick(bytes, desc, 0, out, k);
        EXPECT_EQ(pick.argmax, runner::argmax(expected));
        EXPECT_EQ(pick.top_k, top);
        EXPECT_TRUE(same_bits(out, expected));
      }
    }
  }
}

TEST(TensorIoPick, ReadsF32AndRejectsWhatReadRowRejects) {
  calrt::TensorDesc desc = logits_desc(2, 20, 8);
  desc.dtype = calrt::Dtype::f32;
  desc.bytes = calbin::tiled_element_count(2, 20, 8) * sizeof(float);
  std::vector<float> logical(2 * 20);
  for (size_t i = 0; i < logical.size(); ++i) {
    logical[i] = static_cast<float>((i * 7) % 5);
  }
  std::vector<float> physical(calbin::tiled_element_count(2, 20, 8), 0.0f);
  calbin::to_physical(logical.data(), physical.data(), 2, 20, 8);
  std::vector<std::byte> bytes(desc.bytes);
  std::memcpy(bytes.data(), physical.data(), bytes.size());
  std::vector<float> out(20);
  const runner::RowPick pick = runner::read_row_pick(bytes, desc, 1, out, 3);
  const std::vector<float> expected(logical.begin() + 20, logical.end());
  EXPECT_EQ(out, expected);
  EXPECT_EQ(pick.argmax, runner::argmax(expected));
  EXPECT_EQ(pick.top_k, runner::top_k(expected, 3));
  // A k no row can reach is clipped, as top_k clips it, not reserved.
  const size_t huge = std::numeric_limits<size_t>::max();
  EXPECT_EQ(runner::read_row_pick(bytes, desc, 1, out, huge).top_k, runner::top_k(expected, huge));

  std::vector<float> short_out(19);
  EXPECT_THROW(runner::read_row_pick(bytes, desc, 0, short_out, 3), std::runtime_error);
  EXPECT_THROW(runner::read_row_pick(bytes, desc, 2, out, 3), std::runtime_error);
  EXPECT_EQ(runner::rank_row(bytes, desc, 1, 3).top_k, runner::top_k(expected, 3));
  EXPECT_EQ(runner::rank_row(bytes, desc, 1, huge).top_k, runner::top_k(expected, huge));
  EXPECT_THROW(runner::rank_row(bytes, desc, 2, 3), std::runtime_error);
  EXPECT_THROW(runner::rank_row(std::span(bytes).first(bytes.size() - 1), desc, 0, 3),
               std::runtime_error);
}

}  // namespace
