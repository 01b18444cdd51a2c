#include <algorithm>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "calbin/golden.hpp"
#include "calbin/manifest.hpp"
#include "gen_fixture.hpp"
#include "simdev/gen/memory_layout.hpp"
#include "simdev/gen/reference/golden_cases.hpp"
#include "simdev/gen/reference/reference_weights.hpp"
#include "simdev/gen/tiny_preset.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {
namespace {

calbin::Manifest read_tiny() {
  auto manifest = calbin::read_manifest(testing::tiny_calbin());
  EXPECT_TRUE(manifest.has_value()) << manifest.error().to_string();
  return manifest.value_or(calbin::Manifest{});
}

TEST(GeneratedManifest, ReadsBackAndVerifiesFiles) {
  const calbin::Manifest m = read_tiny();
  const auto verified = calbin::verify_files(testing::tiny_calbin(), m);
  EXPECT_TRUE(verified.has_value()) << verified.error().to_string();
  EXPECT_EQ(m.architecture, "qwen3");
  EXPECT_EQ(m.runtime_abi, "0.7.6");
  EXPECT_EQ(m.calbin_version, "tiny-1");
  EXPECT_EQ(m.chips, 2u);
  EXPECT_EQ(m.device_memory_required.unit, "MiB");
  ASSERT_TRUE(m.golden.has_value());
  EXPECT_NE(m.find_file(m.golden->index), nullptr);
  EXPECT_EQ(m.param_blocks.size(), 3u);
}

TEST(GeneratedManifest, ModelsHaveExactNamesTypesAndTiledLogits) {
  const calbin::Manifest m = read_tiny();
  const calbin::Model* prefill = m.find_model("qwen3_tiny_prefill_c256");
  const calbin::Model* decode = m.find_model("qwen3_tiny_decode");
  ASSERT_NE(prefill, nullptr);
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(prefill->metadata_type, "llm_prefill");
  EXPECT_EQ(decode->metadata_type, "llm_decode");
  EXPECT_EQ(prefill->inputs.at(0).shape, (std::vector<int64_t>{1, 256}));
  EXPECT_EQ(decode->inputs.at(1).shape, (std::vector<int64_t>{1, 1}));
  const calbin::TensorDesc& logits = decode->outputs.at(0);
  EXPECT_EQ(logits.layout.kind, calbin::Layout::Kind::kTiled);
  EXPECT_EQ(logits.layout.tile_d0, 16u);
  EXPECT_EQ(logits.bytes, (1000u + 15) / 16 * 16 * 2);
  EXPECT_EQ(decode->csrs.at(0).name, "cur_seq_len");
  EXPECT_EQ(decode->csrs.at(1).name, "past_kv_cur_seq_len");
  EXPECT_EQ(prefill->ops.size(), 2u);
  EXPECT_EQ(prefill->ops.at(0).ops.size(), 1 + 2 * 11 + 3u);
}

TEST(GeneratedManifest, ReservationsAscendAndHoldEveryAddress) {
  const calbin::Manifest m = read_tiny();
  for (uint32_t chip = 0; chip < m.chips; ++chip) {
    uint64_t end = 0;
    for (const calbin::Reservation& r : m.reservations) {
      if (r.chip != chip) {
        continue;
      }
      EXPECT_EQ(r.size.unit, "B");
      EXPECT_GE(r.base, end) << r.name;
      end = r.base + *r.size.bytes();
    }
    EXPECT_LE(end, *m.device_memory_required.bytes());
  }
  EXPECT_EQ(*m.find_reservation("kv_cache", 0)->size.bytes(),
            kv_cache_bytes_per_chip(tiny_config()));
  for (const calbin::Model& model : m.models) {
    const calbin::Reservation* io = m.find_reservation("io", 0);
    for (const calbin::PingPongSlot& slot : model.ping_pong) {
      for (size_t i = 0; i < slot.input_addresses.size(); ++i) {
        EXPECT_GE(slot.input_addresses[i], io->base);
        EXPECT_LE(slot.input_addresses[i] + model.inputs[i].bytes, io->base + io->size.value);
      }
    }
    EXPECT_NE(model.ping_pong.at(0).output_addresses.at(0),
              model.ping_pong.at(1).output_addresses.at(0));
  }
}

TEST(GeneratedGolden, GreedyAgreesWithStoredLogits) {
  const auto set = calbin::read_golden(testing::tiny_calbin() / "golden");
  ASSERT_TRUE(set.has_value()) << set.error().to_string();
  ASSERT_EQ(set->cases.size(), 8u);
  for (const calbin::GoldenCase& c : set->cases) {
    ASSERT_EQ(c.greedy.size(), c.decode_steps + 1u);
    EXPECT_EQ(c.greedy[0], top_ids(c.prefill_logits, 1)[0]) << c.name;
    for (uint32_t s = 0; s < c.decode_steps; ++s) {
      const std::vector<float> row(c.decode_logits.begin() + s * 1000,
                                   c.decode_logits.begin() + (s + 1) * 1000);
      EXPECT_EQ(c.greedy[s + 1], top_ids(row, 1)[0]) << c.name << " step " << s;
      EXPECT_EQ(c.top_ids[s * set->top_k], c.greedy[s + 1]);
    }
  }
}

// The stored golden must be what the reference computes from the calbin's own seed.
TEST(GeneratedGolden, RecomputesFromTheReference) {
  const auto set = calbin::read_golden(testing::tiny_calbin() / "golden");
  ASSERT_TRUE(set.has_value());
  const ModelConfig config = tiny_config();
  auto weights = dequantised_unsplit(config, make_weights(config, 1));
  ASSERT_TRUE(weights.has_value());
  const auto model = ref::Model::create(config, *weights);
  ASSERT_TRUE(model.has_value());
  const auto again = run_golden_case(*model, {"len17", 17, false, "len17"}, 1);
  ASSERT_TRUE(again.has_value());
  const auto stored = std::find_if(set->cases.begin(), set->cases.end(),
                                   [](const auto& c) { return c.name == "len17"; });
  ASSERT_NE(stored, set->cases.end());
  EXPECT_EQ(again->tokens, stored->tokens);
  EXPECT_EQ(again->greedy, stored->greedy);
  EXPECT_EQ(again->prefill_logits, stored->prefill_logits);
}

TEST(Generate, RefusesAnExistingDirectoryWithoutForce) {
  GenOptions options = testing::tiny_options("exists", 1);
  std::filesystem::create_directories(options.out_dir);
  options.force = false;
  const auto result = generate(options);
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().to_string().find(options.out_dir.string()), std::string::npos);
}

TEST(Generate, ForceReplacesAndLeavesNoTemporaries) {
  GenOptions options = testing::tiny_options("forced", 2);
  options.with_golden = false;
  std::filesystem::create_directories(options.out_dir);
  std::ofstream(options.out_dir / "stale.txt") << "old";
  ASSERT_TRUE(generate(options).has_value());
  EXPECT_FALSE(std::filesystem::exists(options.out_dir / "stale.txt"));
  EXPECT_TRUE(std::filesystem::exists(options.out_dir / "manifest.json"));
  for (const auto& entry : std::filesystem::directory_iterator(testing::scratch_root())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos);
  }
}

TEST(Generate, RejectsAnUnknownPreset) {
  GenOptions options = testing::tiny_options("unknown", 1);
  options.preset = "tiny2";
  const auto result = generate(options);
  ASSERT_FALSE(result.has_value());
  EXPECT_NE(result.error().to_string().find("tiny2"), std::string::npos);
}

}  // namespace
}  // namespace simdev::gen
