// The golden set's two references as they read the calbin: the weights read back from the
// param block files, the device-contract reference and its rows in the golden set.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "calbin/bf16.hpp"
#include "calbin/golden.hpp"
#include "calbin/manifest.hpp"
#include "gen_fixture.hpp"
#include "simdev/gen/reference/calbin_weights.hpp"
#include "simdev/gen/reference/contract_model.hpp"
#include "simdev/gen/reference/golden_cases.hpp"
#include "simdev/gen/reference/reference_weights.hpp"
#include "simdev/gen/tiny_preset.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {
namespace {

namespace fs = std::filesystem;

calbin::Manifest manifest_of(const fs::path& dir) {
  auto manifest = calbin::read_manifest(dir);
  EXPECT_TRUE(manifest.has_value()) << manifest.error().to_string();
  return manifest.value_or(calbin::Manifest{});
}

ref::CalbinWeights read_weights(const fs::path& dir) {
  auto weights = ref::CalbinWeights::read(dir, manifest_of(dir));
  EXPECT_TRUE(weights.has_value()) << weights.error().to_string();
  return weights.value_or(ref::CalbinWeights{});
}

// Reading the files back must give exactly the generator's dequantised tensors: the shards
// reassemble, axis-1 shards share their row scales, nothing is off by one row.
TEST(CalbinWeights, ReassembleTheGeneratorsTensorsExactly) {
  const ModelConfig config = tiny_config();
  const auto from_files = ref::dequantised(config, read_weights(testing::tiny_calbin()));
  const auto from_memory = dequantised_unsplit(config, make_weights(config, 1));
  ASSERT_TRUE(from_files.has_value()) << from_files.error().to_string();
  ASSERT_TRUE(from_memory.has_value());
  EXPECT_EQ(from_files->embedding.values, from_memory->embedding.values);
  EXPECT_EQ(from_files->lm_head.values, from_memory->lm_head.values);
  EXPECT_EQ(from_files->final_norm, from_memory->final_norm);
  ASSERT_EQ(from_files->layers.size(), from_memory->layers.size());
  for (size_t l = 0; l < config.layers; ++l) {
    const auto& a = from_files->layers[l];
    const auto& b = from_memory->layers[l];
    EXPECT_EQ(a.q_proj.values, b.q_proj.values) << "layer " << l;
    EXPECT_EQ(a.o_proj.values, b.o_proj.values) << "layer " << l;
    EXPECT_EQ(a.mlp.down_proj.values, b.mlp.down_proj.values) << "layer " << l;
    EXPECT_EQ(a.k_norm, b.k_norm) << "layer " << l;
  }
}

// A copy of the seed-1 calbin whose manifest or files a test may break.
fs::path broken_copy(const std::string& name) {
  const fs::path dir = testing::scratch_root() / ("broken-" + name);
  fs::remove_all(dir);
  fs::copy(testing::tiny_calbin(), dir, fs::copy_options::recursive);
  return dir;
}

calbin::WeightTensor& entry(calbin::Manifest& m, const std::string& name, int axis_index = 0) {
  for (calbin::WeightTensor& w : m.weights) {
    if (w.name == name && (w.shard.axis < 0 || w.shard.index == uint32_t(axis_index))) return w;
  }
  ADD_FAILURE() << "no weight " << name;
  return m.weights.front();
}

std::string read_error(const fs::path& dir, const calbin::Manifest& m) {
  auto weights = ref::CalbinWeights::read(dir, m);
  return weights ? std::string("no error") : weights.error().to_string();
}

TEST(CalbinWeights, AShortParamFileNamesTheTensor) {
  const fs::path dir = broken_copy("short");
  calbin::Manifest m = manifest_of(dir);
  const calbin::WeightTensor& last =
      *std::max_element(m.weights.begin(), m.weights.end(), [](const auto& a, const auto& b) {
        return a.file < b.file || (a.file == b.file && a.offset < b.offset);
      });
  fs::resize_file(dir / last.file, last.offset + 1);
  const std::string error = read_error(dir, m);
  EXPECT_NE(error.find(last.name), std::string::npos) << error;
  EXPECT_NE(error.find("past the end"), std::string::npos) << error;
}

TEST(CalbinWeights, AScaleCountThatDisagreesIsRefused) {
  const fs::path dir = broken_copy("scales");
  calbin::Manifest m = manifest_of(dir);
  entry(m, "layers.1.attn.o_proj", 1).quant.scale_count -= 1;
  const std::string error = read_error(dir, m);
  EXPECT_NE(error.find("layers.1.attn.o_proj"), std::string::npos) << error;
  EXPECT_NE(error.find("scale_count"), std::string::npos) << error;
}

TEST(CalbinWeights, OverlappingShardsAreRefused) {
  const fs::path dir = broken_copy("overlap");
  calbin::Manifest m = manifest_of(dir);
  calbin::WeightTensor& second = entry(m, "layers.0.mlp.gate_proj", 1);
  const uint64_t rows = second.shard.end - second.shard.begin;
  second.shard.begin -= 1;  // one row into the first shard, the same byte count
  second.shard.end -= 1;
  ASSERT_EQ(second.shard.end - second.shard.begin, rows);
  const std::string error = read_error(dir, m);
  EXPECT_NE(error.find("layers.0.mlp.gate_proj"), std::string::npos) << error;
  EXPECT_NE(error.find("overlap"), std::string::npos) << error;
}

TEST(CalbinWeights, AByteCountThatDisagreesWithTheShapeIsNamed) {
  const fs::path dir = broken_copy("bytes");
  calbin::Manifest m = manifest_of(dir);
  entry(m, "layers.0.attn_norm").bytes += 2;
  const std::string error = read_error(dir, m);
  EXPECT_NE(error.find("layers.0.attn_norm"), std::string::npos) << error;
  EXPECT_NE(error.find(".bytes"), std::string::npos) << error;
}

TEST(CalbinWeights, AShardRangeOutsideItsAxisIsNamed) {
  const fs::path dir = broken_copy("range");
  calbin::Manifest m = manifest_of(dir);
  calbin::WeightTensor& second = entry(m, "lm_head", 1);
  second.shard.end = second.shard.begin;  // empty range
  const std::string error = read_error(dir, m);
  EXPECT_NE(error.find("lm_head"), std::string::npos) << error;
  EXPECT_NE(error.find("outside the axis"), std::string::npos) << error;
}

TEST(CalbinWeights, AnInt8TensorWithoutItsQuantSchemeIsRefused) {
  const fs::path dir = broken_copy("scheme");
  calbin::Manifest m = manifest_of(dir);
  entry(m, "layers.1.mlp.up_proj", 0).quant.scheme = "none";
  const std::string error = read_error(dir, m);
  EXPECT_NE(error.find("layers.1.mlp.up_proj"), std::string::npos) << error;
  EXPECT_NE(error.find("quant scheme \"none\" with dtype int8"), std::string::npos) << error;
}

TEST(CalbinWeights, AMissingShardLeavesAGapThatIsNamed) {
  const fs::path dir = broken_copy("gap");
  calbin::Manifest m = manifest_of(dir);
  const calbin::WeightTensor* second = &entry(m, "lm_head", 1);
  m.weights.erase(m.weights.begin() + (second - m.weights.data()));
  const std::string error = read_error(dir, m);
  EXPECT_NE(error.find("lm_head"), std::string::npos) << error;
  EXPECT_NE(error.find("unstored"), std::string::npos) << error;
}

contract::Model contract_model() {
  auto model = contract::Model::create(tiny_config(), read_weights(testing::tiny_calbin()));
  EXPECT_TRUE(model.has_value()) << model.error().to_string();
  return *model;
}

std::vector<int32_t> iota_positions(size_t first, size_t count) {
  std::vector<int32_t> positions(count);
  std::iota(positions.begin(), positions.end(), static_cast<int32_t>(first));
  return positions;
}

// MODEL.md: per-token quantisation and a cache written before it is read make a token's
// result independent of the chunking.
TEST(ContractModel, ChunkingDoesNotChangeTheLogits) {
  const contract::Model model = contract_model();
  std::vector<int32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % 1000);
  contract::Session whole(model);
  const auto one_block = whole.forward(tokens, iota_positions(0, tokens.size()));
  contract::Session pieces(model);
  ASSERT_TRUE(pieces.forward(std::span(tokens).first(13), iota_positions(0, 13)));
  const auto two_blocks = pieces.forward(std::span(tokens).subspan(13), iota_positions(13, 27));
  ASSERT_TRUE(one_block && two_blocks);
  EXPECT_EQ(*one_block, *two_blocks);
  EXPECT_EQ(pieces.kv_length(), tokens.size());
}

TEST(ContractModel, LogitsAreBf16ValuesNearTheFp32Reference) {
  const ModelConfig config = tiny_config();
  const auto weights = ref::dequantised(config, read_weights(testing::tiny_calbin()));
  ASSERT_TRUE(weights);
  const auto fp32 = ref::Model::create(config, *weights);
  ASSERT_TRUE(fp32);
  const std::vector<int32_t> tokens = {5, 900, 17, 17, 400};
  const std::vector<int32_t> positions = iota_positions(0, tokens.size());
  contract::Session contract_session(contract_model());
  ref::Session fp32_session(*fp32);
  const auto c = contract_session.forward(tokens, positions);
  const auto f = fp32_session.forward(tokens, positions);
  ASSERT_TRUE(c && f);
  ASSERT_EQ(c->size(), f->size());
  double max_error = 0.0;
  for (size_t i = 0; i < c->size(); ++i) {
    EXPECT_EQ((*c)[i], calbin::round_to_bf16((*c)[i])) << "logit " << i << " is not BF16";
    max_error = std::max(max_error, double(std::fabs((*c)[i] - (*f)[i])));
  }
  // The quantisation's accuracy cost on the tiny model is about 0.15 (runner/README.md).
  EXPECT_GT(max_error, 0.0);
  EXPECT_LT(max_error, 0.5);
}

TEST(ContractModel, RefusesTokensPastTheContext) {
  contract::Session session(contract_model());
  const std::vector<int32_t> tokens(tiny_config().context + 1, 3);
  const auto logits = session.forward(tokens, iota_positions(0, tokens.size()));
  ASSERT_FALSE(logits.has_value());
  EXPECT_NE(logits.error().to_string().find("context"), std::string::npos);
}

TEST(ContractModel, AMisshapenTensorIsNamed) {
  ModelConfig config = tiny_config();
  config.ffn *= 2;  // the calbin's MLP matrices are now the wrong shape
  const auto model = contract::Model::create(config, read_weights(testing::tiny_calbin()));
  ASSERT_FALSE(model.has_value());
  EXPECT_NE(model.error().to_string().find("layers.0.mlp.gate_proj"), std::string::npos)
      << model.error().to_string();
}

// The stored rows are where golden.hpp says (every chunk's last token, then each decode
// step) and hold what the contract model computes for them.
TEST(GeneratedGolden, ContractRowsRecomputeAtChunkEndsAndDecodeSteps) {
  const auto set = calbin::read_golden(testing::tiny_calbin() / "golden");
  ASSERT_TRUE(set.has_value()) << set.error().to_string();
  EXPECT_EQ(set->contract_reference, kContractReference);
  const auto len257 = std::find_if(set->cases.begin(), set->cases.end(),
                                   [](const auto& c) { return c.name == "len257"; });
  ASSERT_NE(len257, set->cases.end());
  std::vector<int32_t> expected_rows = {255, 256};
  for (int32_t s = 0; s < 8; ++s) expected_rows.push_back(257 + s);
  EXPECT_EQ(len257->contract_rows, expected_rows);
  std::vector<calbin::GoldenCase> chain{*len257};
  chain[0].contract_rows.clear();
  chain[0].contract_logits.clear();
  ASSERT_TRUE(add_contract_rows(contract_model(), chain));
  EXPECT_EQ(chain[0].contract_rows, len257->contract_rows);
  EXPECT_EQ(chain[0].contract_logits, len257->contract_logits);
}

}  // namespace
}  // namespace simdev::gen
