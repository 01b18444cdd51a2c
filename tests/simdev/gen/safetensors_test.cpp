// `simdev gen --weights`: the safetensors reader against files this test writes byte by
// byte, so that every header the reader must refuse can be made; and the weights reaching
// the stored tensors unchanged (bf16) or within int8 rounding (matrices). The whole path,
// from NumPy-written checkpoints to a passing smoke, is the ctest `gen_safetensors_*`.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calbin/bf16.hpp"
#include "simdev/gen/config_file.hpp"
#include "simdev/gen/weights/safetensors.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace simdev::gen {
namespace {

struct Tensor {
  std::string dtype = "F32";
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// A safetensors file: header, then each tensor's bytes in order. `edit` may change the header
// before it is written, to make a bad one.
void write_safetensors(const fs::path& path, const std::map<std::string, Tensor>& tensors,
                       const std::function<void(json&)>& edit = {}) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    const uint64_t begin = data.size();
    for (const float v : t.values) {
      if (t.dtype == "F32") {
        data.append(reinterpret_cast<const char*>(&v), 4);
      } else {
        const uint16_t bf = calbin::f32_to_bf16(v);
        data.append(reinterpret_cast<const char*>(&bf), 2);
      }
    }
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  header["__metadata__"] = {{"format", "pt"}};
  if (edit) edit(header);
  const std::string text = header.dump();
  const uint64_t length = text.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&length), 8);
  out << text << data;
}

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("calrt_safetensors_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A message naming `needle`, from opening a file made with `edit`.
  std::string open_error(const std::function<void(json&)>& edit) {
    write_safetensors(dir_ / "model.safetensors",
                      {{"a", {"F32", {2, 2}, {1, 2, 3, 4}}}, {"b", {"BF16", {3}, {1, 2, 3}}}},
                      edit);
    auto dir = SafetensorsDir::open(dir_);
    return dir ? std::string() : dir.error().to_string();
  }

  fs::path dir_;
};

TEST_F(Safetensors, ReadsF32AndBf16) {
  write_safetensors(dir_ / "model.safetensors", {{"a", {"F32", {2, 2}, {1.5f, -2, 3, 4}}},
                                                 {"b", {"BF16", {3}, {1, -0.5f, 3}}}});
  auto dir = SafetensorsDir::open(dir_);
  ASSERT_TRUE(dir) << dir.error().to_string();
  EXPECT_EQ(dir->size(), 2u);
  EXPECT_EQ(*dir->read("a", {2, 2}), (std::vector<float>{1.5f, -2, 3, 4}));
  EXPECT_EQ(*dir->read("b", {3}), (std::vector<float>{1, -0.5f, 3}));
  const auto wrong = dir->read("a", {4});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().to_string().find("a: shape [2, 2], the config needs [4]"),
            std::string::npos)
      << wrong.error().to_string();
}

TEST_F(Safetensors, RefusesBadHeadersNamingTheTensor) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& h) { h["a"]["dtype"] = "I8"; }, "a: dtype \"I8\""},
      {[](json& h) {
         h["a"]["data_offsets"] = {0, 1000};
       },
       "a: data_offsets [0,1000]: outside"},
      {[](json& h) {
         h["a"]["data_offsets"] = {0, 12};
       },
       "a: data_offsets [0,12]: 12 bytes for 4"},
      {[](json& h) {
         h["b"]["data_offsets"] = {10, 16};
       },
       "two tensors share bytes"},
      {[](json& h) { h["b"]["shape"] = {-3}; }, "b: shape [-3]"},
      {[](json& h) { h["b"]["shape"] = "3"; }, "b: shape \"3\": not a list"},
      {[](json& h) { h["a"] = 7; }, "a: not an object"},
      {[](json& h) {
         h["a"]["data_offsets"] = {16, 0};
       },
       "a: data_offsets [16,0]"},
  };
  for (const auto& [edit, needle] : cases) {
    const std::string error = open_error(edit);
    EXPECT_NE(error.find(needle), std::string::npos) << needle << "\ngot: " << error;
    EXPECT_NE(error.find("model.safetensors"), std::string::npos) << error;
  }
}

TEST_F(Safetensors, RefusesTruncatedAndHostileFiles) {
  const fs::path path = dir_ / "model.safetensors";
  std::ofstream(path) << "abc";
  EXPECT_NE(SafetensorsDir::open(dir_).error().to_string().find("too short"), std::string::npos);
  {
    const uint64_t huge = uint64_t{1} << 62;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&huge), 8);
    out << "{}";
  }
  EXPECT_NE(SafetensorsDir::open(dir_).error().to_string().find("runs past the file"),
            std::string::npos);
  {
    const uint64_t length = 5;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&length), 8);
    out << "[1,2]";
  }
  EXPECT_NE(SafetensorsDir::open(dir_).error().to_string().find("not a JSON object"),
            std::string::npos);
  write_safetensors(path, {{"a", {"F32", {1}, {NAN}}}});
  auto dir = SafetensorsDir::open(dir_);
  ASSERT_TRUE(dir);
  EXPECT_NE(dir->read("a", {1}).error().to_string().find("a: element 0 is nan"), std::string::npos);
  fs::remove(path);
  EXPECT_NE(SafetensorsDir::open(dir_).error().to_string().find("neither model.safetensors"),
            std::string::npos);
}

TEST_F(Safetensors, ShardsComeFromTheIndex) {
  write_safetensors(dir_ / "part-1.safetensors", {{"a", {"F32", {1}, {1}}}});
  write_safetensors(dir_ / "part-2.safetensors", {{"b", {"F32", {1}, {2}}}});
  const auto index = [&](const json& map) {
    std::ofstream(dir_ / "model.safetensors.index.json") << json{{"weight_map", map}}.dump();
  };
  index({{"a", "part-1.safetensors"}, {"b", "part-2.safetensors"}});
  auto dir = SafetensorsDir::open(dir_);
  ASSERT_TRUE(dir) << dir.error().to_string();
  EXPECT_EQ(*dir->read("b", {1}), std::vector<float>{2});
  index({{"a", "part-1.safetensors"}, {"b", "part-1.safetensors"}});
  EXPECT_NE(SafetensorsDir::open(dir_).error().to_string().find("weight_map.b: not in"),
            std::string::npos);
  index({{"a", "../part-1.safetensors"}});
  EXPECT_NE(SafetensorsDir::open(dir_).error().to_string().find("not a file name"),
            std::string::npos);
  index({{"a", "part-3.safetensors"}});
  EXPECT_NE(SafetensorsDir::open(dir_).error().to_string().find("part-3.safetensors: cannot open"),
            std::string::npos);
}

// A whole checkpoint of the qwen3-small shape: the stored tensors are the written ones.
TEST_F(Safetensors, WeightsReachTheStoredTensors) {
  auto config = read_model_config(fs::path(CALRT_GEN_CONFIGS) / "qwen3-small" / "config.json");
  ASSERT_TRUE(config);
  ASSERT_TRUE(config->tied_embeddings);
  std::map<std::string, Tensor> tensors;
  float next = 0.0f;
  for (const WeightSpec& spec : weight_specs(*config)) {
    if (spec.name == "lm_head") continue;  // tied: the embedding
    Tensor t{"BF16", spec.shape, {}};
    size_t count = 1;
    for (const int64_t d : spec.shape) count *= static_cast<size_t>(d);
    for (size_t i = 0; i < count; ++i) {
      next = std::fmod(next * 1.37f + 0.11f, 2.0f) - 0.5f;  // anything not seeded
      t.values.push_back(calbin::round_to_bf16(next));
    }
    tensors[hf_weight_name(spec.name, true)] = std::move(t);
  }
  write_safetensors(dir_ / "model.safetensors", tensors);
  auto checkpoint = SafetensorsDir::open(dir_);
  ASSERT_TRUE(checkpoint) << checkpoint.error().to_string();
  auto weights = read_weights(*config, *checkpoint);
  ASSERT_TRUE(weights) << weights.error().to_string();
  const StoredWeight* embedding = find_weight(*weights, "tok_embeddings");
  const StoredWeight* head = find_weight(*weights, "lm_head");
  ASSERT_TRUE(embedding && head);
  const Tensor& written = tensors.at("model.embed_tokens.weight");
  for (size_t i = 0; i < written.values.size(); i += 97) {
    EXPECT_EQ(calbin::bf16_to_f32(embedding->bf16[i]), written.values[i]) << i;
    EXPECT_EQ(calbin::bf16_to_f32(head->bf16[i]), written.values[i]) << "tied, " << i;
  }
  const StoredWeight* q = find_weight(*weights, "layers.1.attn.q_proj");
  const std::vector<float> dequantised = dequantize(q->quantised);
  const Tensor& q_written = tensors.at("model.layers.1.self_attn.q_proj.weight");
  for (size_t i = 0; i < dequantised.size(); ++i) {
    // Per-row int8: within half a step; the values lie in (-2.5, 1.5), so a step is <= 2.5/127.
    ASSERT_NEAR(dequantised[i], q_written.values[i], 0.5 * 2.5 / 127 + 1e-6) << i;
  }

  // A tensor the model does not have, and one it needs that is missing, are named.
  tensors["model.layers.0.self_attn.q_proj.bias"] = {"F32", {1}, {0}};
  write_safetensors(dir_ / "model.safetensors", tensors);
  auto extra = read_weights(*config, *SafetensorsDir::open(dir_));
  ASSERT_FALSE(extra);
  EXPECT_EQ(extra.error().field, "model.layers.0.self_attn.q_proj.bias");
  tensors.erase("model.layers.0.self_attn.q_proj.bias");
  tensors.erase("model.norm.weight");
  write_safetensors(dir_ / "model.safetensors", tensors);
  auto missing = read_weights(*config, *SafetensorsDir::open(dir_));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().field, "model.norm.weight");
}

// `simdev gen --weights` refuses what it cannot package, by name, with exit 2.
TEST_F(Safetensors, GenRefusesWeightsItCannotUse) {
  const fs::path configs = CALRT_GEN_CONFIGS;
  const std::string out = " --out '" + (dir_ / "out").string() + "' 2>&1";
  const std::string weights = " --weights '" + dir_.string() + "'";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--preset tiny" + weights, "--weights: needs --config"},
      {"--config '" + (configs / "qwen3-moe-small/config.json").string() + "'" + weights,
       "neither model.safetensors nor model.safetensors.index.json"},
      {"--config '" + (configs / "llama-small/config.json").string() + "'" + weights,
       "model_type: 'llama'"},
      {"--config '" + (configs / "qwen3-small/config.json").string() + "'" + weights,
       "neither model.safetensors nor model.safetensors.index.json"},
  };
  for (const auto& [args, needle] : cases) {
    std::string output;
    FILE* pipe = ::popen((std::string("'") + SIMDEV_EXE + "' gen " + args + out).c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    char buffer[4096];
    size_t got = 0;
    while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, got);
    const int status = ::pclose(pipe);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << args << "\n" << output;
    EXPECT_NE(output.find(needle), std::string::npos) << args << "\n" << output;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << "nothing half-written";
  }
}

}  // namespace
}  // namespace simdev::gen
