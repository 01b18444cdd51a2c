// Writing a manifest and reading it back gives the same manifest.
#include <gtest/gtest.h>

#include <fstream>

#include "test_util.hpp"

namespace calbin {
namespace {

using testing::sample_manifest;
using testing::TempDir;

TEST(ManifestRoundTrip, WriteThenReadGivesTheSameManifest) {
  TempDir dir;
  const Manifest original = sample_manifest();
  ASSERT_TRUE(write_manifest(dir.path(), original));
  const Result<Manifest> read = read_manifest(dir.path());
  ASSERT_TRUE(read) << read.error().to_string();
  EXPECT_EQ(to_json(*read), to_json(original));
}

// read_manifest keeps the last manifests it parsed by their text: reading one again gives
// the same manifest, and a changed file, even of the same size, is parsed anew.
TEST(ManifestRoundTrip, ReadingAgainNeverGivesAStaleManifest) {
  TempDir dir;
  Manifest original = sample_manifest();
  original.calbin_version = "v-aaaa";
  ASSERT_TRUE(write_manifest(dir.path(), original));
  const Result<Manifest> first = read_manifest(dir.path());
  const Result<Manifest> again = read_manifest(dir.path());
  ASSERT_TRUE(first && again);
  EXPECT_EQ(to_json(*again), to_json(original));

  Manifest changed = original;
  changed.calbin_version = "v-bbbb";  // the same length: the same file size
  ASSERT_TRUE(write_manifest(dir.path(), changed));
  const Result<Manifest> after = read_manifest(dir.path());
  ASSERT_TRUE(after);
  EXPECT_EQ(after->calbin_version, "v-bbbb");
  EXPECT_EQ(to_json(*after), to_json(changed));

  // A file that no longer parses fails, however recently a good one was read.
  std::ofstream(dir / "manifest.json") << to_json(changed).substr(0, 100);
  EXPECT_FALSE(read_manifest(dir.path()));
}

TEST(ManifestRoundTrip, FieldsSurviveIndividually) {
  const Result<Manifest> read = parse_manifest(to_json(sample_manifest()), "m.json");
  ASSERT_TRUE(read) << read.error().to_string();
  EXPECT_EQ(read->chips, 2u);
  EXPECT_EQ(read->device_memory_required.unit, "GiB");
  EXPECT_EQ(read->llm.v_dtype, Dtype::kInt8);
  EXPECT_DOUBLE_EQ(read->llm.rms_eps, 1e-5);
  EXPECT_EQ(read->reservations[0].base, 0x100000000u);
  EXPECT_EQ(read->weights[0].shard.axis, 0);
  EXPECT_EQ(read->weights[0].quant.scheme, "w8a8_dynamic");
  ASSERT_NE(read->find_model("qwen3_decode"), nullptr);
  const Model& decode = *read->find_model("qwen3_decode");
  EXPECT_EQ(decode.type, ModelType::kDecode);
  EXPECT_EQ(decode.outputs[0].layout.kind, Layout::Kind::kTiled);
  EXPECT_EQ(decode.outputs[0].layout.tile_d0, 16u);
  EXPECT_EQ(decode.outputs[0].bytes, 151936u * 2);
  EXPECT_EQ(decode.ping_pong[1].output_addresses[0], 0x110000u);
  EXPECT_EQ(decode.ops[1].ops.size(), 2u);
  const Op& op = decode.ops[1].ops[1];
  EXPECT_EQ(op.weight_bytes, 1024u);
  EXPECT_EQ(op.experts, 8u);
  EXPECT_EQ(op.kv_bytes, 2048u);
  EXPECT_EQ(op.kv_slots, 256u);
  ASSERT_TRUE(read->golden.has_value());
  EXPECT_EQ(read->golden->index, "golden/golden.json");
}

TEST(ManifestRoundTrip, FullRangeUnsignedValuesSurvive) {
  Manifest manifest = sample_manifest();
  manifest.reservations[0].base = UINT64_MAX;
  manifest.device_memory_required.value = UINT64_MAX;
  const Result<Manifest> read = parse_manifest(to_json(manifest), "m.json");
  ASSERT_TRUE(read) << read.error().to_string();
  EXPECT_EQ(read->reservations[0].base, UINT64_MAX);
  EXPECT_EQ(read->device_memory_required.value, UINT64_MAX);
}

TEST(ManifestRoundTrip, WriterIsDeterministicAndStartsWithTheSchema) {
  const std::string text = to_json(sample_manifest());
  EXPECT_EQ(text, to_json(sample_manifest()));
  EXPECT_EQ(text.rfind("{\n  \"schema\": 1,", 0), 0u) << text.substr(0, 40);
}

TEST(ManifestRoundTrip, OptionalSectionsMayBeOmitted) {
  const char* minimal = R"({
    "schema": 1, "calbin_version": "1", "architecture": "a", "runtime_abi": "0.7.6",
    "chips": 2, "chip_mask": 3,
    "device_memory_required": {"value": 16, "unit": "GiB"},
    "llm": {"vocab": 8, "context": 64, "batch": 1, "layers": 1, "hidden": 8, "q_heads": 2,
            "kv_heads": 1, "head_dim": 4, "ffn": 16, "k_dtype": "bf16", "v_dtype": "bf16",
            "partition": "tensor_parallel"},
    "files": [],
    "models": [{"name": "m", "type": "decode", "metadata_type": "llm_decode", "inputs": [],
                "outputs": [], "workspace_bytes": 0,
                "ops": [{"chip": 0, "ops": [{"type": "rope", "shape": [1], "dtype": "bf16",
                                             "flops": 10, "bytes": 20}]}]}],
    "some_future_key": {"anything": [1, 2, 3]}
  })";
  const Result<Manifest> read = parse_manifest(minimal, "m.json");
  ASSERT_TRUE(read) << read.error().to_string();
  EXPECT_FALSE(read->golden.has_value());
  EXPECT_FALSE(read->timing_only);
  EXPECT_TRUE(read->weights.empty());  // the reader allows it; `check` fails it (params.in_file)
  EXPECT_DOUBLE_EQ(read->llm.rope_theta, 10000.0);
  // An op without the timing breakdown (older writers) reads as "unknown".
  const Op& op = read->models.at(0).ops.at(0).ops.at(0);
  EXPECT_EQ(op.layer, -1);
  EXPECT_EQ(op.weight_bytes, 0u);
  EXPECT_EQ(op.experts, 0u);
  EXPECT_EQ(op.kv_bytes, 0u);
  EXPECT_EQ(op.kv_slots, 0u);
}

TEST(ManifestRoundTrip, AtomicWriteLeavesNoTemporaryFiles) {
  TempDir dir;
  ASSERT_TRUE(write_manifest(dir.path(), sample_manifest()));
  ASSERT_TRUE(write_manifest(dir.path(), sample_manifest()));  // replaces the first
  size_t entries = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename(), "manifest.json");
    ++entries;
  }
  EXPECT_EQ(entries, 1u);
}

TEST(ManifestRoundTrip, WriteIntoMissingDirectoryFailsCleanly) {
  TempDir dir;
  const Result<void> written = write_manifest(dir / "does/not/exist", sample_manifest());
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().to_string().find("does/not/exist"), std::string::npos);
}

TEST(ManifestLookups, FindByExactNameOnly) {
  const Manifest manifest = sample_manifest();
  EXPECT_NE(manifest.find_model("qwen3_prefill"), nullptr);
  EXPECT_EQ(manifest.find_model("qwen3"), nullptr);  // never by substring
  EXPECT_EQ(manifest.find_model("qwen3_prefill "), nullptr);
  ASSERT_NE(manifest.find_file("param_blk0.bin"), nullptr);
  EXPECT_EQ(manifest.find_file("param_blk0.bin")->size, 1000u);
  ASSERT_NE(manifest.find_reservation("kv_cache", 1), nullptr);
  EXPECT_EQ(manifest.find_reservation("kv_cache", 0), nullptr);
}

}  // namespace
}  // namespace calbin
