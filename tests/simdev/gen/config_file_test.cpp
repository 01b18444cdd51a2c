// `simdev gen --config`: Hugging Face config.json files of the three supported families and
// the project's YAML give the shapes their numbers say; everything else is refused naming the
// file, the field and the value.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "simdev/gen/config_file.hpp"

namespace fs = std::filesystem;

namespace simdev::gen {
namespace {

const fs::path kConfigs = CALRT_GEN_CONFIGS;

ModelConfig read_ok(const fs::path& path) {
  auto config = read_model_config(path);
  EXPECT_TRUE(config) << (config ? "" : config.error().to_string());
  return config ? *config : ModelConfig{};
}

TEST(ConfigFile, Qwen3ConfigJson) {
  const ModelConfig c = read_ok(kConfigs / "qwen3-small" / "config.json");
  EXPECT_EQ(c.architecture, "qwen3");
  EXPECT_EQ(c.layers, 2u);
  EXPECT_EQ(c.hidden, 96u);
  EXPECT_EQ(c.q_heads, 8u);
  EXPECT_EQ(c.kv_heads, 4u);
  EXPECT_EQ(c.head_dim, 16u);
  EXPECT_EQ(c.ffn, 192u);
  EXPECT_EQ(c.vocab, 640u);
  EXPECT_EQ(c.experts, 0u);
  EXPECT_EQ(c.tokenizer_context, 2048u);
  EXPECT_EQ(c.context, 2048u) << "the default context is capped by max_position_embeddings";
  EXPECT_EQ(c.chips, kDefaultConfigChips);
  EXPECT_EQ(c.prefill_chunk, kDefaultConfigChunk);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.rms_eps, 1e-6);
  EXPECT_EQ(c.calbin_version_prefix, "qwen3_small");
  EXPECT_EQ(c.prefill_model, "qwen3_small_prefill_c256");
  EXPECT_EQ(c.decode_model, "qwen3_small_decode");
}

// The shipped 0.6B shape (simdev/gen/README.md) reads as Qwen3-0.6B's published shape.
TEST(ConfigFile, TheShippedDenseShapeReads) {
  const ModelConfig c = read_ok(fs::path(CALRT_SHIPPED_CONFIGS) / "qwen3-0.6b-shape.json");
  EXPECT_EQ(c.architecture, "qwen3");
  EXPECT_EQ(c.layers, 28u);
  EXPECT_EQ(c.hidden, 1024u);
  EXPECT_EQ(c.q_heads, 16u);
  EXPECT_EQ(c.kv_heads, 8u);
  EXPECT_EQ(c.head_dim, 128u);
  EXPECT_EQ(c.ffn, 3072u);
  EXPECT_EQ(c.vocab, 151936u);
  EXPECT_EQ(c.experts, 0u);
}

TEST(ConfigFile, LlamaDerivesItsHeadSize) {
  const ModelConfig c = read_ok(kConfigs / "llama-small" / "config.json");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.head_dim, 16u) << "hidden_size / num_attention_heads";
  EXPECT_EQ(c.layers, 3u);
  EXPECT_EQ(c.ffn, 344u);
  EXPECT_EQ(c.context, kDefaultConfigContext);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rms_eps, 1e-5);
}

TEST(ConfigFile, Qwen3MoeTakesTheExpertShape) {
  const ModelConfig c = read_ok(kConfigs / "qwen3-moe-small" / "config.json");
  EXPECT_EQ(c.architecture, "qwen3_moe");
  EXPECT_EQ(c.experts, 8u);
  EXPECT_EQ(c.active_experts, 2u);
  EXPECT_EQ(c.ffn, 64u) << "moe_intermediate_size, not intermediate_size";
  EXPECT_TRUE(c.norm_topk_prob);
}

TEST(ConfigFile, ProjectYamlOverridesItsHuggingFaceBase) {
  const ModelConfig c = read_ok(kConfigs / "qwen3-small-1chip.yaml");
  EXPECT_EQ(c.chips, 1u);
  EXPECT_EQ(c.prefill_chunk, 128u);
  EXPECT_EQ(c.hidden, 96u) << "from hf_config";
  EXPECT_EQ(c.prefill_model, "qwen3_small_1chip_prefill_c128");
  EXPECT_EQ(read_ok(kConfigs / "qwen3-small-4chip.yaml").chips, 4u);
  EXPECT_EQ(read_ok(kConfigs / "qwen3-small-1chip.yaml").v_cache, calbin::Dtype::kBf16);
  EXPECT_EQ(read_ok(kConfigs / "qwen3-small-s8v.yaml").v_cache, calbin::Dtype::kInt8);
  const ModelConfig trained = read_ok(kConfigs / "qwen3-deep-28-trained.yaml");
  EXPECT_EQ(trained.weight_init, ModelConfig::WeightInit::kTrained);
  EXPECT_EQ(trained.layers, 28u);
  EXPECT_EQ(read_ok(kConfigs / "qwen3-deep-28-outliers-100.yaml").outlier_gain, 100.0);
}

class ConfigErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("calrt_config_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "model");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The Qwen3 config with `key` set to `json` (a JSON value), or removed when json is empty.
  fs::path qwen3_with(const std::string& key, const std::string& json) {
    std::ifstream in(kConfigs / "qwen3-small" / "config.json");
    nlohmann::json doc = nlohmann::json::parse(in);
    if (json.empty()) {
      doc.erase(key);
    } else {
      doc[key] = nlohmann::json::parse(json);
    }
    const fs::path path = dir_ / "model" / "config.json";
    std::ofstream(path) << doc.dump(2);
    return path;
  }
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path;
  }
  static void expect_error(const fs::path& path, const std::string& field,
                           const std::string& mentions) {
    auto config = read_model_config(path);
    ASSERT_FALSE(config) << path << " was accepted";
    EXPECT_EQ(config.error().file, path.string());
    EXPECT_EQ(config.error().field, field) << config.error().to_string();
    EXPECT_NE(config.error().message.find(mentions), std::string::npos)
        << config.error().to_string();
  }

  fs::path dir_;
};

TEST_F(ConfigErrors, HuggingFaceFieldsNameTheirValue) {
  expect_error(qwen3_with("model_type", "\"gpt2\""), "model_type", "'gpt2'");
  expect_error(qwen3_with("num_hidden_layers", ""), "num_hidden_layers", "missing");
  expect_error(qwen3_with("hidden_size", "\"96\""), "hidden_size", "\"96\" is not a positive");
  expect_error(qwen3_with("num_attention_heads", "0"), "num_attention_heads", "0 is not");
  expect_error(qwen3_with("rope_theta", "-1"), "rope_theta", "-1 is not a positive number");
  expect_error(qwen3_with("rope_scaling", "{\"rope_type\": \"llama3\", \"factor\": 32.0}"),
               "rope_scaling", "RoPE scaling is not modelled");
  expect_error(qwen3_with("attention_bias", "true"), "attention_bias", "true: biases");
  expect_error(qwen3_with("use_sliding_window", "true"), "use_sliding_window", "true");
  expect_error(qwen3_with("hidden_act", "\"gelu\""), "hidden_act", "\"gelu\": only SiLU");
  // Divisibility is the generator's check, reported against this file.
  expect_error(qwen3_with("num_key_value_heads", "3"), "q_heads", "not a multiple of kv_heads 3");
}

TEST_F(ConfigErrors, FilesThatAreNotConfigs) {
  expect_error(write("model/config.json", "{ not json"), "", "not JSON");
  expect_error(write("model/config.json", "[1, 2]"), "", "not a JSON object");
  expect_error(write("notes.txt", "layers: 2"), "", "expected a Hugging Face config .json");
  expect_error(dir_ / "missing.json", "", "cannot open: No such file");
  expect_error(write("huge.yaml", "name: x\n#" + std::string(size_t{1} << 20, 'x')), "",
               "more than the limit of 1048576");
  expect_error(
      write("model/config.json", "{\"model_type\": \"qwen3_moe\", \"mlp_only_layers\": [1]}"),
      "mlp_only_layers", "[1]: every layer must be MoE");
  expect_error(write("model/config.json", "{\"model_type\": \"qwen3_moe\", \"norm_topk_prob\": 1}"),
               "norm_topk_prob", "1: not true/false");
}

TEST_F(ConfigErrors, ProjectYamlKeys) {
  expect_error(write("a.yaml", "name: a\nlayerz: 2\n"), "layerz", "unknown key");
  expect_error(write("b.yaml", "layers: 2\n"), "name", "missing");
  expect_error(write("c.yaml", "name: '--'\n"), "name", "'--' has no letter or digit");
  expect_error(write("d.yaml", "name: d\nlayers: two\n"), "layers", "'two' is not a positive");
  expect_error(write("e.yaml", "name: e\nrms_eps: 0\n"), "rms_eps", "'0' is not a positive");
  // The default vocabulary of 1000 over two chips: a chip ranks at most its 500.
  expect_error(write("k.yaml", "name: k\ndecode_top_k: 501\n"), "decode_top_k",
               "501 exceeds a chip's slice of the vocabulary (500)");
  expect_error(write("l.yaml", "name: l\ndecode_top_k: -1\n"), "decode_top_k",
               "'-1' is not a positive");
  expect_error(write("v.yaml", "name: v\nv_cache: int4\n"), "v_cache",
               "'int4' is not bf16 or int8");
  expect_error(write("w.yaml", "name: w\nv_cache: [int8]\n"), "v_cache", "not bf16 or int8");
  expect_error(write("i.yaml", "name: i\nweight_init: pretrained\n"), "weight_init",
               "'pretrained' is not gaussian or trained");
  expect_error(write("o.yaml", "name: o\noutlier_gain: -3\n"), "outlier_gain",
               "'-3' is not a positive number");
  expect_error(write("t.yaml", "name: t\nnorm_topk_prob: maybe\n"), "norm_topk_prob",
               "'maybe' is not true or false");
  expect_error(write("q1.yaml", "name: q\nquant: w4af16\n"), "quant", "not a mapping");
  expect_error(write("q2.yaml", "name: q\nquant: {experts: int3}\n"), "quant.experts",
               "'int3' is not w8a8_dynamic or w4af16");
  expect_error(write("q3.yaml", "name: q\nquant: {group_size: 7}\n"), "quant.group_size",
               "'7' is not an even integer");
  expect_error(write("q4.yaml", "name: q\nquant: {router: int8}\n"), "quant.router",
               "unknown key (known: experts, group_size)");
  expect_error(write("q5.yaml", "name: q\nquant: {experts: w4af16}\n"), "quant.experts",
               "the model is dense");
  // Groups of 64 do not divide the small MoE's hidden size of 96.
  expect_error(
      write("q6.yaml", "hf_config: " + (kConfigs / "qwen3-moe-small" / "config.json").string() +
                           "\nquant: {experts: w4af16, group_size: 64}\n"),
      "quant.group_size", "64 must be even and divide hidden 96");
  {
    // The base's own error names the base.
    auto missing = read_model_config(write("f.yaml", "name: f\nhf_config: nowhere/config.json\n"));
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().file, (dir_ / "nowhere" / "config.json").string());
    EXPECT_NE(missing.error().message.find("cannot open: No such file"), std::string::npos);
  }
  expect_error(write("g.yaml", "- a list\n"), "", "not a YAML mapping");
  // A packaging the shape does not divide: 8 heads over 3 chips.
  expect_error(
      write("h.yaml", "name: h\nhf_config: " + (kConfigs / "qwen3-small" / "config.json").string() +
                          "\nchips: 3\n"),
      "chips", "divide by the chip count 3");
}

}  // namespace
}  // namespace simdev::gen
