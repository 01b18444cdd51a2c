// The start-up contract check (llm/contract.hpp): the hand-written service manifest of the
// tiny calbin passes, and each field changed to a wrong value is refused with a model-level
// model_mismatch whose message names both sides and both values.
#include <gtest/gtest.h>

#include <regex>

#include "tests/llm/engine_fixture.hpp"

namespace calrt::llm::test {
namespace {

TEST(Contract, TinyServiceManifestPassesAndSetsTheCapabilities) {
  auto engine = open_or_fail(config_for(kTiny, kTinyService));
  ASSERT_TRUE(engine);
  const Capabilities& caps = engine->capabilities();
  // The values of tiny-service.yaml, written by hand from the preset's definition.
  EXPECT_EQ(caps.vocab, 1000u);
  EXPECT_EQ(caps.n_batch, 1u);
  EXPECT_EQ(caps.calbin_context, 4608u);
  EXPECT_GT(caps.kv_tokens_per_sequence, 0u);
  EXPECT_EQ(caps.n_ctx, std::min({caps.calbin_context, caps.kv_tokens_per_sequence,
                                  caps.tokenizer_context ? caps.tokenizer_context : 4608u}));
  EXPECT_EQ(caps.decode_top_k, 0u);
}

TEST(Contract, SlotContextCapsNctx) {
  EngineConfig config = config_for(kTiny, kTinyService);
  config.slot_context = 100;
  auto engine = open_or_fail(std::move(config));
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->capabilities().n_ctx, 100u);
}

struct Mutation {
  const char* name;
  const char* from;  // a regex on the service manifest's text
  const char* to;
  std::vector<std::string> named;  // what the message must name: both sides and the values
};

class ContractMismatch : public ::testing::TestWithParam<Mutation> {};

TEST_P(ContractMismatch, IsATypedModelErrorNamingBothSides) {
  const Mutation& m = GetParam();
  const std::string text = read_text(kTinyService);
  const std::string mutated = std::regex_replace(text, std::regex(m.from), m.to);
  ASSERT_NE(mutated, text) << "the mutation " << m.name << " changed nothing";
  const std::filesystem::path dir = std::filesystem::path(CALRT_LLM_SCRATCH) / "contract";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / (std::string(m.name) + ".yaml");
  std::ofstream(path) << mutated;

  auto engine = Engine::open(config_for(kTiny, path));
  ASSERT_FALSE(engine) << m.name << " was accepted";
  const Error& error = engine.error();
  EXPECT_EQ(error.kind, ErrorKind::model) << error.to_string();
  EXPECT_EQ(error.code, ErrorCode::model_mismatch) << error.to_string();
  EXPECT_FALSE(error.retryable());
  for (const std::string& part : m.named) {
    EXPECT_NE(error.message.find(part), std::string::npos)
        << m.name << ": the message does not name \"" << part << "\": " << error.message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ServiceFields, ContractMismatch,
    ::testing::Values(
        Mutation{
            "vocab", "vocab: 1000", "vocab: 1024", {"vocab is 1024", "1000", "Calbin_GetInfo"}},
        Mutation{"context", "context: 4608", "context: 4096", {"context is 4096", "4608"}},
        Mutation{"batch", "batch: 1", "batch: 4", {"batch is 4", "batch is 1"}},
        Mutation{"decode_name",
                 "decode: qwen3_tiny_decode",
                 "decode: qwen3_tiny_decod",
                 {"\"qwen3_tiny_decod\"", "qwen3_tiny_decode"}},
        Mutation{"prefill_is_decode",
                 "prefill: qwen3_tiny_prefill_c256",
                 "prefill: qwen3_tiny_decode",
                 {"qwen3_tiny_decode", "decode"}},
        Mutation{"token_binding",
                 "token: inputs\\[0\\]",
                 "token: inputs[1]",
                 {"tensors.token inputs[1]", "position"}},
        Mutation{"logits_binding", "logits: outputs\\[0\\]", "logits: outputs[3]", {"outputs[3]"}},
        Mutation{"logits_dtype", "logits_dtype: bf16", "logits_dtype: f32", {"f32", "bf16"}},
        Mutation{"csr", "current: cur_seq_len", "current: cur_len", {"cur_len", "cur_seq_len"}},
        Mutation{"calbin_version",
                 "calbin_version: \"tiny-1\"",
                 "calbin_version: \"tiny-2\"",
                 {"tiny-2", "tiny-1"}}),
    [](const ::testing::TestParamInfo<Mutation>& info) { return std::string(info.param.name); });

TEST(Contract, AMissingServiceManifestIsBadInputNamingTheFile) {
  auto engine = Engine::open(config_for(kTiny, "/nonexistent/service.yaml"));
  ASSERT_FALSE(engine);
  EXPECT_EQ(engine.error().code, ErrorCode::invalid_request);
  EXPECT_NE(engine.error().message.find("/nonexistent/service.yaml"), std::string::npos)
      << engine.error().message;
}

}  // namespace
}  // namespace calrt::llm::test

namespace calrt::llm::test {
namespace {

// The device's own view against the calbin's manifest: the simulator's table with
// Calbin_GetTensor reporting another tile size for the logits (a runtime whose metadata
// disagrees with the package). The row reader takes the tile from the descriptor, so a
// disagreement must stop the start, naming both.
const CalrtApi* real_table = nullptr;

CalrtError* retiled_get_tensor(Calrt_Calbin_GetTensor_Args* args) {
  CalrtError* error = real_table->Calbin_GetTensor(args);
  if (error == nullptr && args->role == CALRT_ROLE_LOGITS && args->tile_d0 == 16) {
    args->tile_d0 = 32;
  }
  return error;
}

TEST(Contract, ATileSizeTheDeviceReportsOtherwiseIsAModelMismatch) {
  static CalrtApi table;
  real_table = calrt_sim_get_api(CALRT_ABI_MAJOR);
  table = *real_table;
  table.Calbin_GetTensor = &retiled_get_tensor;
  EngineConfig config = config_for(kTiny, kTinyService);
  config.device.api = calrt::Api(&table);
  auto engine = Engine::open(std::move(config));
  ASSERT_FALSE(engine);
  EXPECT_EQ(engine.error().code, ErrorCode::model_mismatch);
  for (const char* part : {"tile_d0 16", "tile_d0 32", "manifest.json"}) {
    EXPECT_NE(engine.error().message.find(part), std::string::npos)
        << part << " not in: " << engine.error().message;
  }
}

}  // namespace
}  // namespace calrt::llm::test
