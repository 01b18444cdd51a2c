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
