// The timing-only reference preset, Qwen3-30B-A3B. Every expected value is computed here from
// the model's published dimensions (REFERENCE.md, the model card), never copied from
// the generator's output.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "calbin/acceptance/checks.hpp"
#include "calbin/manifest.hpp"
#include "gen_fixture.hpp"

namespace simdev::gen {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kLayers = 48;
constexpr uint64_t kHidden = 2048;
constexpr uint64_t kQHeads = 32;
constexpr uint64_t kKvHeads = 4;
constexpr uint64_t kHeadDim = 128;
constexpr uint64_t kExperts = 128;
constexpr uint64_t kActiveExperts = 8;
constexpr uint64_t kExpertFfn = 768;
constexpr uint64_t kVocab = 151936;
constexpr uint64_t kContext = 40960;
constexpr uint64_t kBatch = 1;
constexpr uint64_t kChips = 2;
constexpr uint64_t kGroup = 128;  // w4af16 group size
constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr const char* kPrefill = "qwen3_30b_a3b_prefill_c256";
constexpr const char* kDecode = "qwen3_30b_a3b_decode";

const fs::path& reference_calbin() {
  static const fs::path dir = [] {
    const GenOptions options = testing::preset_options("qwen3-30b-a3b", "reference", 1);
    const auto manifest = generate(options);
    EXPECT_TRUE(manifest.has_value()) << manifest.error().to_string();
    return options.out_dir;
  }();
  return dir;
}

// Read once: the manifest declares about a thousand weight shards and 3,280 ops.
const calbin::Manifest& read_reference() {
  static const calbin::Manifest manifest = [] {
    auto read = calbin::read_manifest(reference_calbin());
    EXPECT_TRUE(read.has_value()) << read.error().to_string();
    return read.value_or(calbin::Manifest{});
  }();
  return manifest;
}

uint64_t elements(const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (const int64_t dim : shape) {
    count *= static_cast<uint64_t>(dim);
  }
  return count;
}

std::string file_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(ReferencePreset, ReadsBackVerifiesAndIsTimingOnly) {
  const calbin::Manifest& m = read_reference();
  const auto verified = calbin::verify_files(reference_calbin(), m);
  EXPECT_TRUE(verified.has_value()) << verified.error().to_string();
  EXPECT_TRUE(m.timing_only);
  EXPECT_EQ(m.architecture, "qwen3_moe");
  EXPECT_EQ(m.runtime_abi, "0.7.6");
  EXPECT_EQ(m.chips, kChips);
  EXPECT_FALSE(m.golden.has_value());
  EXPECT_TRUE(m.param_blocks.empty());
  ASSERT_FALSE(m.weights.empty());
  for (const calbin::WeightTensor& w : m.weights) {
    EXPECT_TRUE(w.file.empty()) << w.name;
    EXPECT_TRUE(w.quant.scale_file.empty()) << w.name;
    EXPECT_GT(w.bytes, 0u) << w.name;
  }
  // The directory holds the manifest and the listed files, nothing else: no weight file.
  std::set<std::string> listed = {"manifest.json"};
  for (const calbin::FileEntry& file : m.files) {
    listed.insert(file.path);
  }
  for (const auto& entry : fs::recursive_directory_iterator(reference_calbin())) {
    const std::string relative = fs::relative(entry.path(), reference_calbin()).string();
    EXPECT_EQ(listed.count(relative), 1u) << relative << " is on disk but not listed";
    EXPECT_NE(entry.path().extension(), ".bin") << relative;
  }
}

TEST(ReferencePreset, LlmInfoIsTheReferenceModel) {
  const calbin::LlmInfo& llm = read_reference().llm;
  EXPECT_EQ(llm.layers, kLayers);
  EXPECT_EQ(llm.hidden, kHidden);
  EXPECT_EQ(llm.q_heads, kQHeads);
  EXPECT_EQ(llm.kv_heads, kKvHeads);
  EXPECT_EQ(llm.head_dim, kHeadDim);
  EXPECT_EQ(llm.ffn, kExpertFfn);
  EXPECT_EQ(llm.experts, kExperts);
  EXPECT_EQ(llm.active_experts, kActiveExperts);
  EXPECT_EQ(llm.vocab, kVocab);
  EXPECT_EQ(llm.context, kContext);
  EXPECT_EQ(llm.batch, kBatch);
  EXPECT_EQ(llm.tokenizer_context, 131072u);
  EXPECT_EQ(llm.k_dtype, calbin::Dtype::kBf16);
  EXPECT_EQ(llm.v_dtype, calbin::Dtype::kBf16);
  EXPECT_EQ(llm.partition, "tensor_parallel");
}

TEST(ReferencePreset, ModelNamesAreExactAndNotSubstrings) {
  const calbin::Manifest& m = read_reference();
  ASSERT_EQ(m.models.size(), 2u);
  const calbin::Model* prefill = m.find_model(kPrefill);
  const calbin::Model* decode = m.find_model(kDecode);
  ASSERT_NE(prefill, nullptr);
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(prefill->type, calbin::ModelType::kPrefill);
  EXPECT_EQ(prefill->metadata_type, "llm_prefill");
  EXPECT_EQ(decode->type, calbin::ModelType::kDecode);
  EXPECT_EQ(decode->metadata_type, "llm_decode");
  EXPECT_EQ(std::string(kPrefill).find(kDecode), std::string::npos);
  EXPECT_EQ(std::string(kDecode).find(kPrefill), std::string::npos);
}

TEST(ReferencePreset, InputsCsrsAndPingPong) {
  const calbin::Manifest& m = read_reference();
  const int64_t chunk = m.llm.prefill_chunk;
  ASSERT_GT(chunk, 0);
  for (const calbin::Model& model : m.models) {
    const int64_t tokens = model.type == calbin::ModelType::kPrefill ? chunk : 1;
    ASSERT_EQ(model.inputs.size(), 2u) << model.name;
    for (const calbin::TensorDesc& input : model.inputs) {
      EXPECT_EQ(input.shape, (std::vector<int64_t>{1, tokens})) << model.name;
      EXPECT_EQ(input.dtype, calbin::Dtype::kInt32) << model.name;
    }
    EXPECT_EQ(model.inputs[0].role, calbin::TensorRole::kToken);
    EXPECT_EQ(model.inputs[1].role, calbin::TensorRole::kPosition);
    ASSERT_EQ(model.csrs.size(), 2u);
    EXPECT_EQ(model.csrs[0].name, "cur_seq_len");
    EXPECT_EQ(model.csrs[1].name, "past_kv_cur_seq_len");
    ASSERT_EQ(model.ping_pong.size(), 2u);
    EXPECT_EQ(model.ping_pong[0].slot, "ping");
    EXPECT_EQ(model.ping_pong[1].slot, "pong");
  }
}

TEST(ReferencePreset, DecodeLogitsRowIs303872Bytes) {
  const calbin::Manifest& m = read_reference();
  const calbin::Model* decode = m.find_model(kDecode);
  ASSERT_NE(decode, nullptr);
  ASSERT_EQ(decode->outputs.size(), 1u);
  const calbin::TensorDesc& logits = decode->outputs[0];
  EXPECT_EQ(logits.role, calbin::TensorRole::kLogits);
  EXPECT_EQ(logits.shape, (std::vector<int64_t>{1, static_cast<int64_t>(kVocab)}));
  EXPECT_EQ(logits.dtype, calbin::Dtype::kBf16);
  EXPECT_EQ(logits.layout.kind, calbin::Layout::Kind::kTiled);
  EXPECT_EQ(logits.layout.tile_d0, 16u);
  // 151936 divides by the 16-wide tile, so the buffer has no padding: data and buffer agree.
  ASSERT_EQ(kVocab % 16, 0u);
  EXPECT_EQ(logits.bytes, kVocab * 2);
  EXPECT_EQ(logits.bytes, 303872u);
}

TEST(ReferencePreset, OpInventoryPerGraphPerChip) {
  const calbin::Manifest& m = read_reference();
  const std::map<std::string, uint64_t> expected = {
      {"flash_attention", kLayers},
      {"moe_grouped_dense", 3 * kLayers},
      {"fused_rmsnorm", 4 * kLayers + 1},
      {"quant_matmul_add", 4 * kLayers + 1},
  };
  ASSERT_EQ(expected.at("fused_rmsnorm"), 193u);
  for (const char* name : {kPrefill, kDecode}) {
    const calbin::Model* model = m.find_model(name);
    ASSERT_NE(model, nullptr);
    ASSERT_EQ(model->ops.size(), kChips) << name;
    for (const calbin::ChipOps& chip : model->ops) {
      std::map<std::string, uint64_t> counts;
      for (const calbin::Op& op : chip.ops) {
        ++counts[op.type];
        EXPECT_GT(op.bytes, 0u) << name << " " << op.name;
      }
      for (const auto& [type, count] : expected) {
        EXPECT_EQ(counts[type], count) << name << " chip " << chip.chip << " " << type;
      }
    }
  }
}

// A chip's slice of one expert's gate (or up) matrix: [ffn / chips, hidden] int4 plus one
// f32 scale per group of kGroup inputs.
uint64_t gate_slice_bytes() {
  const uint64_t rows = kExpertFfn / kChips;
  return rows * kHidden / 2 + rows * (kHidden / kGroup) * 4;
}

const calbin::Op* find_op(const calbin::Model& model, const std::string& name) {
  const auto& ops = model.ops.at(0).ops;
  const auto it =
      std::find_if(ops.begin(), ops.end(), [&](const calbin::Op& op) { return op.name == name; });
  return it == ops.end() ? nullptr : &*it;
}

TEST(ReferencePreset, MoeReadsTheTouchedExpertsAndAttentionScalesWithContext) {
  const calbin::Manifest& m = read_reference();
  const calbin::Op* decode_gate = find_op(*m.find_model(kDecode), "layers.0.experts.gate");
  const calbin::Op* prefill_gate = find_op(*m.find_model(kPrefill), "layers.0.experts.gate");
  ASSERT_NE(decode_gate, nullptr);
  ASSERT_NE(prefill_gate, nullptr);
  // One decode token reads its 8 experts; a 256-token chunk reads all 128.
  EXPECT_GE(decode_gate->bytes, kActiveExperts * gate_slice_bytes());
  EXPECT_LT(decode_gate->bytes, (kActiveExperts + 1) * gate_slice_bytes());
  EXPECT_GE(prefill_gate->bytes, kExperts * gate_slice_bytes());
  EXPECT_EQ(decode_gate->flops, 2 * kActiveExperts * (kExpertFfn / kChips) * kHidden);
  // Decode attention: one query per head of the chip against every KV slot of the context.
  const calbin::Op* attention = find_op(*m.find_model(kDecode), "layers.0.attention");
  ASSERT_NE(attention, nullptr);
  EXPECT_EQ(attention->flops, 4 * kContext * (kQHeads / kChips) * kHeadDim);
}

TEST(ReferencePreset, KvReservationPerChipFollowsTheFormula) {
  const calbin::Manifest& m = read_reference();
  // layers x kv heads per chip x (K, V) x head_dim x context x batch x bf16 bytes.
  const uint64_t per_chip = kLayers * (kKvHeads / kChips) * 2 * kHeadDim * kContext * kBatch * 2;
  ASSERT_EQ(per_chip, 48u * 2 * 2 * 128 * 40960 * 2);
  EXPECT_EQ(per_chip * 8, 15 * kGiB);           // 1.875 GiB per chip
  EXPECT_EQ(per_chip * kChips * 4, 15 * kGiB);  // 3.750 GiB in total
  for (uint32_t chip = 0; chip < kChips; ++chip) {
    const calbin::Reservation* kv = m.find_reservation("kv_cache", chip);
    ASSERT_NE(kv, nullptr);
    EXPECT_EQ(kv->size.bytes(), per_chip) << "chip " << chip;
  }
}

// The published dimensions give 30,532,122,624 parameters.
TEST(ReferencePreset, WeightShardsAddUp) {
  const calbin::Manifest& m = read_reference();
  const uint64_t attention = kQHeads * kHeadDim * kHidden * 2 + kKvHeads * kHeadDim * kHidden * 2;
  const uint64_t norms = 2 * kHidden + 2 * kHeadDim;
  const uint64_t router = kExperts * kHidden;
  const uint64_t experts = kExperts * 3 * kExpertFfn * kHidden;
  const uint64_t params =
      kLayers * (attention + norms + router + experts) + 2 * kVocab * kHidden + kHidden;
  ASSERT_EQ(params, 30532122624u);
  // Per chip: the replicated tensors whole (bf16 embeddings and norms, int8 router), and an
  // equal share of the sharded ones (int8 attention and lm_head, int4 experts).
  const uint64_t replicated =
      kVocab * kHidden * 2 + (kLayers * norms + kHidden) * 2 + kLayers * router;
  const uint64_t sharded = (kLayers * attention + kVocab * kHidden + kLayers * experts / 2);
  const uint64_t chip_bytes = replicated + sharded / kChips;

  std::map<std::string, uint64_t> logical;
  std::map<std::string, uint64_t> extent;
  std::map<std::string, uint64_t> covered;
  std::vector<uint64_t> per_chip(kChips, 0);
  for (const calbin::WeightTensor& w : m.weights) {
    logical[w.name] = elements(w.shape);
    const bool whole = w.shard.axis < 0;
    extent[w.name] = whole ? 1 : static_cast<uint64_t>(w.shape.at(w.shard.axis));
    covered[w.name] += whole ? 1 : w.shard.end - w.shard.begin;
    for (uint32_t chip = 0; chip < kChips; ++chip) {
      per_chip[chip] += (w.shard.chip_mask >> chip & 1u) ? w.bytes : 0;
    }
  }
  uint64_t total = 0;
  for (const auto& [name, count] : logical) {
    total += count;
    EXPECT_EQ(covered[name], extent[name]) << name << ": shards overlap or leave gaps";
  }
  EXPECT_EQ(total, params);
  for (uint32_t chip = 0; chip < kChips; ++chip) {
    EXPECT_EQ(per_chip[chip], chip_bytes) << "chip " << chip;
    const calbin::Reservation* reserved = m.find_reservation("params", chip);
    ASSERT_NE(reserved, nullptr);
    // The reservation holds the data plus the f32 scales (about 5% for group-128 int4).
    EXPECT_GE(*reserved->size.bytes(), chip_bytes);
    EXPECT_LE(*reserved->size.bytes(), chip_bytes + chip_bytes / 10);
  }
}

TEST(ReferencePreset, QuantisationIsMixedW8a8AndW4af16) {
  const calbin::Manifest& m = read_reference();
  std::map<std::string, int> seen;
  for (const calbin::WeightTensor& w : m.weights) {
    if (w.role == "moe_gate_exps" || w.role == "moe_up_exps" || w.role == "moe_down_exps") {
      EXPECT_EQ(w.dtype, calbin::Dtype::kInt4) << w.name;
      EXPECT_EQ(w.quant.scheme, "w4af16") << w.name;
      EXPECT_EQ(w.quant.group_size, kGroup) << w.name;
      EXPECT_EQ(w.shape.at(0), static_cast<int64_t>(kExperts)) << w.name;
      EXPECT_EQ(w.quant.scale_count * kGroup, elements(w.shape) / kChips) << w.name;
    } else if (w.role == "attn_q" || w.role == "attn_o" || w.role == "moe_router") {
      EXPECT_EQ(w.dtype, calbin::Dtype::kInt8) << w.name;
      EXPECT_EQ(w.quant.scheme, "w8a8_dynamic") << w.name;
    } else if (w.role == "embedding" || w.role == "attn_norm") {
      EXPECT_EQ(w.dtype, calbin::Dtype::kBf16) << w.name;
    }
    ++seen[w.role];
  }
  // Every chip holds a shard of every expert's three matrices: tensor, not expert, parallel.
  EXPECT_EQ(seen["moe_gate_exps"], static_cast<int>(kLayers * kChips));
  EXPECT_EQ(seen["moe_router"], static_cast<int>(kLayers));
}

TEST(ReferencePreset, CapacityFitsSixteenGiBPerChip) {
  const calbin::Manifest& m = read_reference();
  EXPECT_EQ(m.device_memory_required.unit, "MiB");
  const uint64_t required = *m.device_memory_required.bytes();
  EXPECT_LE(required, 16 * kGiB);
  for (uint32_t chip = 0; chip < kChips; ++chip) {
    uint64_t sum = 0;
    uint64_t end = 0;
    for (const calbin::Reservation& r : m.reservations) {
      if (r.chip == chip) {
        sum += *r.size.bytes();
        end = std::max(end, r.base + *r.size.bytes());
      }
    }
    EXPECT_LE(sum, 16 * kGiB) << "chip " << chip;
    EXPECT_LE(end, required) << "chip " << chip;
  }
}

TEST(ReferencePreset, PassesEveryStaticAcceptanceCheck) {
  calbin::CheckOptions options;
  options.calbin_dir = reference_calbin();
  const calbin::CheckReport report = calbin::run_checks(options);
  for (const calbin::CheckResult& check : report.checks) {
    // No service manifest is given, and a timing-only calbin carries no golden set.
    const bool skipped = check.id.rfind("service.", 0) == 0 || check.id == "golden.index";
    const auto expected = skipped ? calbin::CheckStatus::kSkip : calbin::CheckStatus::kPass;
    std::string why;
    for (const std::string& message : check.messages) {
      why += message + "\n";
    }
    EXPECT_EQ(check.status, expected) << check.id << ": " << why;
  }
  EXPECT_TRUE(report.passed());
}

TEST(ReferencePreset, GenerationIsDeterministic) {
  const GenOptions options = testing::preset_options("qwen3-30b-a3b", "reference-again", 1);
  const auto again = generate(options);
  ASSERT_TRUE(again.has_value()) << again.error().to_string();
  std::vector<std::string> paths = {"manifest.json"};
  for (const calbin::FileEntry& file : again->files) {
    paths.push_back(file.path);
  }
  for (const std::string& path : paths) {
    const std::string first = file_text(reference_calbin() / path);
    EXPECT_FALSE(first.empty()) << path;
    EXPECT_EQ(first, file_text(options.out_dir / path)) << path;
  }
}

}  // namespace
}  // namespace simdev::gen
