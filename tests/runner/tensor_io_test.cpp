// runner/tensor_io: layout conversion driven by the descriptor's tile_d0, BF16 -> FP32,
// and descriptor consistency errors.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "calbin/bf16.hpp"
#include "calbin/layout.hpp"
#include "runner/tensor_io.hpp"

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

TEST(TensorIo, WritesRowZeroAndZeroesTheRest) {
  calrt::TensorDesc desc;
  desc.name = "tokens";
  desc.dtype = calrt::Dtype::int32;
  desc.shape = {1, 6};
  desc.bytes = 24;
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

}  // namespace
