#include "calbin/acceptance/service_manifest.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace calbin {
namespace {

constexpr const char* kGood = R"(schema: 1
architecture: qwen3
calbin_version: "v1"
runtime_abi: 0.7.6
context: 40960
batch: 1
vocab: 151936
chip_mask: 3
kv_dtype: bf16
models:
  prefill: qwen3_prefill
  decode: qwen3_decode
tensors:
  token: inputs[0]
  position: inputs[1]
  logits: outputs[0]
csr:
  current: cur_seq_len[0]
  past_current: past_kv_cur_seq_len[0]
)";

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

std::string error_of(const std::string& yaml) {
  auto parsed = parse_service_manifest(yaml, "service.yaml");
  EXPECT_FALSE(parsed) << "expected an error for:\n" << yaml;
  return parsed ? "" : parsed.error().to_string();
}

TEST(ServiceManifest, ParsesTheStage10Example) {
  auto parsed = parse_service_manifest(kGood, "service.yaml");
  ASSERT_TRUE(parsed) << parsed.error().to_string();
  EXPECT_EQ(parsed->context, 40960u);
  EXPECT_EQ(parsed->vocab, 151936u);
  EXPECT_EQ(parsed->prefill_model, "qwen3_prefill");
  EXPECT_EQ(parsed->runtime_abi, "0.7.6");
  EXPECT_FALSE(parsed->token.output);
  EXPECT_EQ(parsed->position.index, 1u);
  EXPECT_TRUE(parsed->logits.output);
  EXPECT_EQ(parsed->past_current.name, "past_kv_cur_seq_len");
  ASSERT_TRUE(parsed->chip_mask);
  EXPECT_EQ(*parsed->chip_mask, 3u);
  ASSERT_TRUE(parsed->kv_dtype);
  EXPECT_EQ(*parsed->kv_dtype, Dtype::kBf16);
  EXPECT_FALSE(parsed->logits_dtype);
}

TEST(ServiceManifest, ErrorsNameFileKeyAndValue) {
  struct Case {
    std::string yaml;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {replace(kGood, "schema: 1", "schema: 2"), {"service.yaml", "schema", "2"}},
      {replace(kGood, "vocab: 151936", "vocab: -5"), {"vocab", "-5"}},
      {replace(kGood, "vocab: 151936", "vocab: 1e5"), {"vocab", "1e5"}},
      {replace(kGood, "context: 40960\n", ""), {"context", "missing"}},
      {replace(kGood, "kv_dtype: bf16", "kv_dtype: fp8"), {"kv_dtype", "fp8"}},
      {replace(kGood, "token: inputs[0]", "token: input0"), {"tensors.token", "input0"}},
      {replace(kGood, "token: inputs[0]", "token: weights[0]"), {"tensors.token", "weights[0]"}},
      {replace(kGood, "current: cur_seq_len[0]", "current: cur_seq_len"),
       {"csr.current", "cur_seq_len"}},
      {replace(kGood, "  decode: qwen3_decode\n", ""), {"models.decode", "missing"}},
      {replace(kGood, "vocab: 151936", "vocab: 151936\nvocab: 1000"),
       {"service.yaml", "vocab", "twice", "line 8"}},
      {replace(kGood, "  logits: outputs[0]", "  logits: outputs[0]\n  logits: outputs[1]"),
       {"tensors.logits", "twice"}},
      {"schema: [1", {"service.yaml", "malformed YAML", "line"}},
      {"- just\n- a list\n", {"mapping"}},
  };
  for (const Case& c : cases) {
    const std::string error = error_of(c.yaml);
    for (const std::string& word : c.mentions) {
      EXPECT_NE(error.find(word), std::string::npos) << "'" << word << "' not in: " << error;
    }
  }
}

TEST(ServiceManifest, MissingFileIsAnError) {
  auto parsed = read_service_manifest("/nonexistent/service.yaml");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().to_string().find("/nonexistent/service.yaml"), std::string::npos);
}

}  // namespace
}  // namespace calbin
