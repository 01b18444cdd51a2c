// MODEL.md promises that anyone can rebuild the model from a calbin alone. This test does
// that from the manifest's weight entries and the param files (no generator internals), runs
// the reference on a golden prompt and expects the stored golden logits exactly.
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "calbin/bf16.hpp"
#include "calbin/golden.hpp"
#include "calbin/manifest.hpp"
#include "gen_fixture.hpp"
#include "simdev/gen/reference/reference_model.hpp"
#include "simdev/gen/tiny_preset.hpp"

namespace simdev::gen {
namespace {

using Tensors = std::map<std::string, ref::Matrix>;

const std::vector<uint8_t>& file_bytes(const std::string& path) {
  static std::map<std::string, std::vector<uint8_t>> cache;
  auto& bytes = cache[path];
  if (bytes.empty()) {
    std::ifstream in(testing::tiny_calbin() / path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return bytes;
}

float stored_value(const calbin::WeightTensor& e, size_t shard_row, size_t index) {
  const std::vector<uint8_t>& data = file_bytes(e.file);
  if (e.dtype == calbin::Dtype::kBf16) {
    uint16_t bits = 0;
    std::memcpy(&bits, data.data() + e.offset + 2 * index, 2);
    return calbin::bf16_to_f32(bits);
  }
  float scale = 0.0f;
  std::memcpy(&scale, file_bytes(e.quant.scale_file).data() + e.quant.scale_offset + 4 * shard_row,
              4);
  return static_cast<float>(static_cast<int8_t>(data[e.offset + index])) * scale;
}

void place_shard(const calbin::WeightTensor& e, Tensors& tensors) {
  ref::Matrix& m = tensors[e.name];
  m.rows = static_cast<size_t>(e.shape.at(0));
  m.cols = e.shape.size() > 1 ? static_cast<size_t>(e.shape[1]) : 1;
  m.values.resize(m.rows * m.cols);
  const size_t height = e.shard.axis == 0 ? e.shard.end - e.shard.begin : m.rows;
  const size_t width = e.shard.axis == 1 ? e.shard.end - e.shard.begin : m.cols;
  for (size_t r = 0; r < height; ++r) {
    for (size_t c = 0; c < width; ++c) {
      const size_t row = e.shard.axis == 0 ? e.shard.begin + r : r;
      const size_t col = e.shard.axis == 1 ? e.shard.begin + c : c;
      m.values[row * m.cols + col] = stored_value(e, r, r * width + c);
    }
  }
}

ref::Weights assemble(Tensors& t, uint32_t layers) {
  ref::Weights w;
  w.embedding = t["tok_embeddings"];
  w.final_norm = t["final_norm"].values;
  w.lm_head = t["lm_head"];
  for (uint32_t l = 0; l < layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    w.layers.push_back({t[p + "attn_norm"].values,
                        t[p + "attn.q_norm"].values,
                        t[p + "attn.k_norm"].values,
                        t[p + "ffn_norm"].values,
                        t[p + "attn.q_proj"],
                        t[p + "attn.k_proj"],
                        t[p + "attn.v_proj"],
                        t[p + "attn.o_proj"],
                        {t[p + "mlp.gate_proj"], t[p + "mlp.up_proj"], t[p + "mlp.down_proj"]},
                        {},
                        {}});
  }
  return w;
}

TEST(Rebuild, ModelFromTheCalbinAloneReproducesTheGolden) {
  const auto manifest = calbin::read_manifest(testing::tiny_calbin());
  ASSERT_TRUE(manifest.has_value()) << manifest.error().to_string();
  Tensors tensors;
  for (const calbin::WeightTensor& entry : manifest->weights) {
    place_shard(entry, tensors);
  }
  EXPECT_EQ(tensors.size(), 3 + 11 * size_t{manifest->llm.layers});
  const auto model = ref::Model::create(tiny_config(), assemble(tensors, manifest->llm.layers));
  ASSERT_TRUE(model.has_value()) << model.error().to_string();
  const auto golden = calbin::read_golden(testing::tiny_calbin() / "golden");
  ASSERT_TRUE(golden.has_value());
  for (const calbin::GoldenCase& c : golden->cases) {
    if (c.prompt_len > 20) {
      continue;
    }
    std::vector<int32_t> positions(c.prompt_len);
    std::iota(positions.begin(), positions.end(), 0);
    ref::Session session(*model);
    const auto logits = session.forward(c.tokens, positions);
    ASSERT_TRUE(logits.has_value());
    EXPECT_EQ(*logits, c.prefill_logits) << c.name;
  }
}

}  // namespace
}  // namespace simdev::gen
