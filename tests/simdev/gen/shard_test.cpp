#include "simdev/gen/weights/shard.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "simdev/gen/tiny_preset.hpp"
#include "simdev/gen/weights/param_blocks.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {
namespace {

TEST(Shard, RangesTileTheAxis) {
  EXPECT_EQ(shard_range(10, 0, 2).begin, 0u);
  EXPECT_EQ(shard_range(10, 0, 2).end, 5u);
  EXPECT_EQ(shard_range(10, 1, 2).begin, 5u);
  EXPECT_EQ(shard_range(10, 1, 2).end, 10u);
  EXPECT_EQ(shard_range(7, 2, 3).end, 7u);
}

TEST(Shard, ColumnSlicesReassemble) {
  const size_t rows = 3, cols = 4;
  std::vector<uint8_t> m(rows * cols);
  for (size_t i = 0; i < m.size(); ++i) {
    m[i] = static_cast<uint8_t>(i);
  }
  const auto left = slice_matrix(m, rows, cols, 1, 1, shard_range(cols, 0, 2));
  const auto right = slice_matrix(m, rows, cols, 1, 1, shard_range(cols, 1, 2));
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const uint8_t got = c < 2 ? left[r * 2 + c] : right[r * 2 + c - 2];
      EXPECT_EQ(got, m[r * cols + c]);
    }
  }
}

// Tensors drawn side by side are the ones drawn one after the other, bit for bit, trained
// init (heavy tails and outlier channels) included.
TEST(MakeWeights, AnyThreadCountDrawsTheSameTensors) {
  for (const bool trained : {false, true}) {
    ModelConfig config = tiny_config();
    if (trained) config.weight_init = ModelConfig::WeightInit::kTrained;
    const std::vector<StoredWeight> one = make_weights(config, 9, 1);
    for (const unsigned threads : {2u, 3u, 7u}) {
      const std::vector<StoredWeight> many = make_weights(config, 9, threads);
      ASSERT_EQ(many.size(), one.size());
      for (size_t i = 0; i < one.size(); ++i) {
        EXPECT_EQ(many[i].spec.name, one[i].spec.name);
        EXPECT_EQ(many[i].bf16, one[i].bf16) << one[i].spec.name;
        EXPECT_EQ(many[i].quantised.values, one[i].quantised.values) << one[i].spec.name;
        EXPECT_TRUE(std::equal(many[i].quantised.scales.begin(), many[i].quantised.scales.end(),
                               one[i].quantised.scales.begin(), one[i].quantised.scales.end(),
                               [](float a, float b) {
                                 return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
                               }))
            << one[i].spec.name;
      }
    }
  }
}

// What an independent tool does: rebuild each unsplit int8 matrix and its scales from the
// block bytes and the manifest entries alone, and compare with the generator's tensors.
TEST(Shard, BlocksReassembleToTheUnsplitMatrices) {
  const ModelConfig config = tiny_config();
  const std::vector<StoredWeight> weights = make_weights(config, 3);
  const ParamLayout layout = layout_param_blocks(config, weights);
  auto block_of = [&](const std::string& file) -> const BlockImage& {
    for (const BlockImage& block : layout.blocks) {
      if (block.file == file) {
        return block;
      }
    }
    throw std::runtime_error("no block " + file);
  };
  size_t checked = 0;
  for (const StoredWeight& w : weights) {
    if (w.spec.storage != Storage::kInt8Rows) {
      continue;
    }
    const size_t rows = w.quantised.rows, cols = w.quantised.cols;
    std::vector<int8_t> rebuilt(rows * cols, 0);
    std::vector<float> scales(rows, 0.0f);
    for (const calbin::WeightTensor& e : layout.entries) {
      if (e.name != w.spec.name) {
        continue;
      }
      EXPECT_EQ(e.offset % kParamAlignment, 0u);
      EXPECT_EQ(e.quant.scale_offset % kParamAlignment, 0u);
      const BlockImage& block = block_of(e.file);
      const size_t width = e.shard.axis == 1 ? e.shard.end - e.shard.begin : cols;
      const size_t height = e.shard.axis == 0 ? e.shard.end - e.shard.begin : rows;
      ASSERT_EQ(e.bytes, width * height);
      for (size_t r = 0; r < height; ++r) {
        for (size_t c = 0; c < width; ++c) {
          const size_t row = e.shard.axis == 0 ? e.shard.begin + r : r;
          const size_t col = e.shard.axis == 1 ? e.shard.begin + c : c;
          rebuilt[row * cols + col] = static_cast<int8_t>(block.bytes[e.offset + r * width + c]);
        }
      }
      const BlockImage& scale_block = block_of(e.quant.scale_file);
      for (size_t r = 0; r < e.quant.scale_count; ++r) {
        const size_t row = e.shard.axis == 0 ? e.shard.begin + r : r;
        std::memcpy(&scales[row], scale_block.bytes.data() + e.quant.scale_offset + r * 4, 4);
      }
    }
    EXPECT_EQ(rebuilt, w.quantised.values) << w.spec.name;
    EXPECT_EQ(scales, w.quantised.scales) << w.spec.name;
    ++checked;
  }
  EXPECT_EQ(checked, size_t{config.layers} * 7);
}

TEST(Shard, ChipBlocksHaveEqualSizes) {
  const ModelConfig config = tiny_config();
  const ParamLayout layout = layout_param_blocks(config, make_weights(config, 1));
  ASSERT_EQ(layout.blocks.size(), 3u);
  EXPECT_EQ(layout.blocks[0].chip_mask, 3u);
  EXPECT_EQ(layout.blocks[1].chip_mask, 1u);
  EXPECT_EQ(layout.blocks[2].chip_mask, 2u);
  EXPECT_EQ(layout.blocks[1].bytes.size(), layout.blocks[2].bytes.size());
}

}  // namespace
}  // namespace simdev::gen
