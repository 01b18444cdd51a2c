// The reader's rejections: each names the file, the exact field path and the offending value.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "test_util.hpp"

namespace calbin {
namespace {

using nlohmann::json;
constexpr const char* kLabel = "calbins/tiny/manifest.json";

// Parses the sample manifest after `mutate` and returns the error it must produce.
Error rejection(const std::function<void(json&)>& mutate) {
  json document = json::parse(to_json(testing::sample_manifest()));
  mutate(document);
  const Result<Manifest> read = parse_manifest(document.dump(), kLabel);
  EXPECT_FALSE(read) << "accepted a manifest that should be rejected";
  return read ? Error{} : read.error();
}

void expect_error(const Error& error, const std::string& field, const std::string& fragment) {
  EXPECT_EQ(error.file, kLabel);
  EXPECT_EQ(error.field, field);
  EXPECT_NE(error.message.find(fragment), std::string::npos)
      << "message: " << error.message << "\nexpected to contain: " << fragment;
  EXPECT_NE(error.to_string().find(std::string(kLabel) + ": " + field), std::string::npos)
      << error.to_string();
}

TEST(ManifestReject, MalformedJsonReportsLineAndColumn) {
  const Result<Manifest> read = parse_manifest("{\n  \"schema\": 1,\n  oops\n}", kLabel);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().file, kLabel);
  EXPECT_NE(read.error().message.find("malformed JSON at line 3, column 3"), std::string::npos)
      << read.error().message;
}

TEST(ManifestReject, DegenerateDocuments) {
  for (const char* text : {"", "null", "[]", "1", "\"manifest\"", "{"}) {
    const Result<Manifest> read = parse_manifest(text, kLabel);
    ASSERT_FALSE(read) << text;
    EXPECT_EQ(read.error().file, kLabel);
  }
}

TEST(ManifestReject, DeepNestingIsBounded) {
  const std::string deep = "{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  const Result<Manifest> read = parse_manifest(deep, kLabel);
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().message.find("nesting deeper than"), std::string::npos);
}

TEST(ManifestReject, AKeyGivenTwiceIsRefusedByItsPath) {
  // nlohmann keeps the last of two equal keys; the reader must not pick one silently.
  std::string text = json::parse(to_json(testing::sample_manifest())).dump();
  const size_t at = text.find("\"vocab\":");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"vocab\": 7, ");
  const Result<Manifest> read = parse_manifest(text, kLabel);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().field, "llm.vocab") << read.error().to_string();
  EXPECT_NE(read.error().message.find("key given twice"), std::string::npos)
      << read.error().to_string();

  // The path names array items by index; equal keys in sibling objects are fine.
  std::string models = json::parse(to_json(testing::sample_manifest())).dump();
  const size_t second_model = models.find("\"name\":", models.find("\"models\":"));
  ASSERT_NE(second_model, std::string::npos);
  models.insert(second_model, "\"name\": \"x\", ");
  const Result<Manifest> in_array = parse_manifest(models, kLabel);
  ASSERT_FALSE(in_array);
  EXPECT_EQ(in_array.error().field.rfind("models[0].", 0), 0u) << in_array.error().to_string();
  EXPECT_TRUE(parse_manifest(to_json(testing::sample_manifest()), kLabel));
}

TEST(ManifestReject, HugeArrayOfInvalidElementsFailsAtTheFirst) {
  // Guards against reserving a Model per array element before validating any of them.
  expect_error(rejection([](json& m) {
                 m["models"] = json::array();
                 m["models"].get_ref<json::array_t&>().resize(1000000, 0);
               }),
               "models[0]", "expected an object, got an integer 0");
}

TEST(ManifestReject, WrongSchemaVersion) {
  expect_error(rejection([](json& m) { m["schema"] = 2; }), "schema",
               "unsupported schema version 2");
  expect_error(rejection([](json& m) { m["schema"] = "1"; }), "schema",
               "unsupported schema version \"1\"");
  expect_error(rejection([](json& m) { m.erase("schema"); }), "schema", "missing required field");
}

TEST(ManifestReject, MissingRequiredFields) {
  expect_error(rejection([](json& m) { m["models"][1]["inputs"][0].erase("dtype"); }),
               "models[1].inputs[0].dtype", "missing required field");
  expect_error(rejection([](json& m) { m.erase("llm"); }), "llm", "missing required field");
  expect_error(rejection([](json& m) { m["files"][1].erase("sha256"); }), "files[1].sha256",
               "missing required field");
  expect_error(rejection([](json& m) { m["reservations"][0]["size"].erase("unit"); }),
               "reservations[0].size.unit", "missing required field");
}

TEST(ManifestReject, WrongJsonTypes) {
  expect_error(rejection([](json& m) { m["chips"] = "2"; }), "chips",
               "expected an unsigned integer, got a string \"2\"");
  expect_error(rejection([](json& m) { m["models"] = json::object(); }), "models",
               "expected an array");
  expect_error(rejection([](json& m) { m["models"][0]["outputs"][0] = 5; }), "models[0].outputs[0]",
               "expected an object, got an integer 5");
  expect_error(rejection([](json& m) { m["timing_only"] = 1; }), "timing_only",
               "expected a boolean");
  expect_error(rejection([](json& m) { m["llm"]["rope_theta"] = "1e6"; }), "llm.rope_theta",
               "expected a number");
  const std::string text = to_json(testing::sample_manifest());
  const size_t at = text.find("\"rope_theta\": ") + 14;
  const Result<Manifest> infinite =
      parse_manifest(text.substr(0, at) + "1e999" + text.substr(text.find(',', at)), kLabel);
  ASSERT_FALSE(infinite);
  EXPECT_EQ(infinite.error().message, "malformed JSON: number overflow parsing '1e999'");
}

TEST(ManifestReject, NegativeAndNonIntegerNumbers) {
  expect_error(rejection([](json& m) { m["reservations"][1]["base"] = -5; }),
               "reservations[1].base", "negative value -5");
  expect_error(rejection([](json& m) { m["models"][0]["workspace_bytes"] = 1.5; }),
               "models[0].workspace_bytes", "got a number 1.5");
  expect_error(rejection([](json& m) { m["chip_mask"] = 4294967296ULL; }), "chip_mask",
               "4294967296 does not fit in 32 bits");
  expect_error(rejection([](json& m) { m["files"][0]["size"] = 1e30; }), "files[0].size",
               "expected an unsigned integer");
}

TEST(ManifestReject, UnknownEnumStrings) {
  expect_error(rejection([](json& m) { m["models"][1]["inputs"][0]["dtype"] = "fp8"; }),
               "models[1].inputs[0].dtype", "unknown dtype \"fp8\"");
  expect_error(rejection([](json& m) { m["models"][0]["type"] = "train"; }), "models[0].type",
               "unknown model type \"train\"");
  expect_error(rejection([](json& m) { m["models"][0]["outputs"][0]["role"] = "logit"; }),
               "models[0].outputs[0].role", "unknown tensor role \"logit\"");
  expect_error(rejection([](json& m) { m["models"][0]["outputs"][0]["layout"]["kind"] = "nz"; }),
               "models[0].outputs[0].layout.kind", "unknown layout kind \"nz\"");
  expect_error(rejection([](json& m) { m["llm"]["k_dtype"] = "s8"; }), "llm.k_dtype",
               "unknown dtype \"s8\"");
  expect_error(rejection([](json& m) { m["weights"][0]["quant"]["scheme"] = "w2"; }),
               "weights[0].quant.scheme", "unknown quantisation scheme \"w2\"");
  expect_error(rejection([](json& m) { m["models"][0]["ping_pong"][0]["slot"] = "pang"; }),
               "models[0].ping_pong[0].slot", "unknown ping/pong slot \"pang\"");
  expect_error(rejection([](json& m) { m["models"][0]["ops"][0]["ops"][0]["dtype"] = "fp8"; }),
               "models[0].ops[0].ops[0].dtype", "unknown dtype \"fp8\"");
}

TEST(ManifestReject, RankAboveTheMaximum) {
  expect_error(rejection([](json& m) {
                 m["models"][0]["inputs"][1]["shape"] = json::array({1, 1, 1, 1, 1, 1, 1, 1, 1});
               }),
               "models[0].inputs[1].shape", "rank 9 exceeds the maximum of 8");
}

TEST(ManifestReject, NonPositiveDimensions) {
  expect_error(rejection([](json& m) { m["models"][0]["inputs"][0]["shape"][1] = 0; }),
               "models[0].inputs[0].shape[1]", "dimension 0 must be > 0");
  expect_error(rejection([](json& m) { m["weights"][0]["shape"][0] = -3; }), "weights[0].shape[0]",
               "dimension -3 must be > 0");
  expect_error(rejection([](json& m) { m["weights"][0]["shape"][0] = 2.5; }), "weights[0].shape[0]",
               "expected an integer dimension");
}

TEST(ManifestReject, SizeOverflow) {
  expect_error(rejection([](json& m) {
                 m["weights"][0]["shape"] = json::array({uint64_t{1} << 40, uint64_t{1} << 40});
               }),
               "weights[0].shape", "overflows 64-bit arithmetic");
  expect_error(rejection([](json& m) {
                 m["models"][0]["ops"][1]["ops"][1]["shape"][0] = 18446744073709551615ULL;
               }),
               "models[0].ops[1].ops[1].shape[0]", "overflows 64-bit arithmetic");
  expect_error(rejection([](json& m) {
                 m["models"][0]["outputs"][0]["shape"] = json::array({uint64_t{1} << 62, 4});
               }),
               "models[0].outputs[0].shape", "overflows 64-bit arithmetic");
}

TEST(ManifestReject, TiledLayoutNeedsATileSize) {
  expect_error(rejection([](json& m) { m["models"][1]["outputs"][0]["layout"].erase("tile_d0"); }),
               "models[1].outputs[0].layout.tile_d0", "tiled layout needs tile_d0 > 0");
  expect_error(rejection([](json& m) { m["models"][1]["outputs"][0]["layout"]["tile_d0"] = 0; }),
               "models[1].outputs[0].layout.tile_d0", "tiled layout needs tile_d0 > 0");
  expect_error(rejection([](json& m) {
                 m["models"][0]["inputs"][0]["layout"]["tile_d0"] = 16;  // row_major
               }),
               "models[0].inputs[0].layout.tile_d0", "row_major layout with tile_d0 16");
}

TEST(ManifestReject, TensorBiggerThanItsBuffer) {
  expect_error(rejection([](json& m) { m["models"][0]["outputs"][0]["bytes"] = 100; }),
               "models[0].outputs[0].bytes",
               "\"logits\" [1, 151936] bf16 tiled(16) needs 303872 bytes but its buffer has 100");
  // 151936 is a multiple of 16, so check that padding counts on a ragged last dimension.
  expect_error(rejection([](json& m) {
                 json& t = m["models"][0]["outputs"][0];
                 t["shape"] = json::array({1, 17});
                 t["bytes"] = 34;  // 17 bf16 values, but tiled(16) pads to 32 of them
               }),
               "models[0].outputs[0].bytes", "needs 64 bytes but its buffer has 34");
}

TEST(ManifestReject, ChipCountOutOfRange) {
  expect_error(rejection([](json& m) { m["chips"] = 0; }), "chips", "chip count 0");
  expect_error(rejection([](json& m) { m["chips"] = 9; }), "chips", "chip count 9 is outside 1..8");
}

TEST(ManifestReject, DuplicateModelNames) {
  expect_error(rejection([](json& m) { m["models"][1]["name"] = "qwen3_prefill"; }),
               "models[1].name", "duplicate model name \"qwen3_prefill\"");
}

TEST(ManifestReject, ShardStructure) {
  expect_error(rejection([](json& m) { m["weights"][0]["shard"]["axis"] = 2; }),
               "weights[0].shard.axis", "axis 2 is neither -1 nor a dimension of a rank-2 shape");
  expect_error(rejection([](json& m) { m["weights"][0]["shard"]["index"] = 2; }),
               "weights[0].shard.index", "shard index 2 is not below count 2");
}

TEST(ManifestReject, OpBreakdownExceedingItsBytes) {
  // The sample op moves 4096 bytes: 1024 of weights and 2048 of KV.
  expect_error(rejection([](json& m) { m["models"][0]["ops"][0]["ops"][0]["kv_bytes"] = 3073; }),
               "models[0].ops[0].ops[0].weight_bytes",
               "weight_bytes 1024 + kv_bytes 3073 exceed bytes 4096");
  expect_error(
      rejection([](json& m) { m["models"][0]["ops"][0]["ops"][0]["weight_bytes"] = 5000; }),
      "models[0].ops[0].ops[0].weight_bytes", "exceed bytes 4096");
  expect_error(rejection([](json& m) { m["models"][0]["ops"][0]["ops"][0]["experts"] = -1; }),
               "models[0].ops[0].ops[0].experts", "negative");
}

TEST(ManifestReject, OversizedManifest) {
  const std::string huge(kMaxManifestBytes + 1, ' ');
  const Result<Manifest> read = parse_manifest(huge, kLabel);
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().message.find("more than the limit"), std::string::npos);

  testing::TempDir dir;
  testing::write_text(dir / "manifest.json", "");
  std::filesystem::resize_file(dir / "manifest.json", kMaxManifestBytes + 1);  // sparse
  const Result<Manifest> from_file = read_manifest(dir.path());
  ASSERT_FALSE(from_file);
  EXPECT_EQ(from_file.error().file, (dir / "manifest.json").string());
  EXPECT_NE(from_file.error().message.find("more than the limit"), std::string::npos);
}

// A manifest.json that is a symlink out of the calbin directory is refused unread: nothing of
// the outside file appears in the error (it did, as the first byte of a parse error).
TEST(ManifestReject, AManifestLinkedOutOfTheCalbinIsRefusedUnread) {
  testing::TempDir outside;
  testing::write_text(outside / "secret", "S3CRET not json");
  testing::TempDir dir;
  std::filesystem::create_symlink(outside / "secret", dir / "manifest.json");
  const Result<Manifest> read = read_manifest(dir.path());
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().file, (dir / "manifest.json").string());
  EXPECT_NE(read.error().message.find("outside the calbin directory"), std::string::npos)
      << read.error().to_string();
  EXPECT_EQ(read.error().to_string().find("S3CRET"), std::string::npos);
  EXPECT_EQ(read.error().to_string().find("'S'"), std::string::npos);
  // A link that stays inside is a file of the calbin like any other.
  testing::TempDir inside;
  testing::write_text(inside / "real.json", to_json(testing::sample_manifest()));
  std::filesystem::create_symlink(inside / "real.json", inside / "manifest.json");
  EXPECT_TRUE(read_manifest(inside.path())) << "a link inside the calbin";
}

TEST(ManifestReject, MissingManifestFileNamesThePath) {
  testing::TempDir dir;
  const Result<Manifest> read = read_manifest(dir.path());
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().file, (dir / "manifest.json").string());
}

TEST(ManifestAccept, UnknownKeysAndImplausibleValuesLoad) {
  // `check` judges these; the reader must let it see them.
  json document = json::parse(to_json(testing::sample_manifest()));
  document["models"][0]["inputs"][0]["vendor_extension"] = {{"x", 1}};
  document["device_memory_required"] = {{"value", 16777216}, {"unit", "MB"}};
  document["models"][0]["metadata_type"] = "llm_decode";
  document["reservations"][0]["size"]["unit"] = "bananas";
  document["files"][0]["path"] = "../outside.bin";
  const Result<Manifest> read = parse_manifest(document.dump(), kLabel);
  ASSERT_TRUE(read) << read.error().to_string();
  EXPECT_EQ(read->device_memory_required.value, 16777216u);
  EXPECT_EQ(read->reservations[0].size.bytes(), std::nullopt);
}

}  // namespace
}  // namespace calbin
