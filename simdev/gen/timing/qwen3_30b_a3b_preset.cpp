#include "simdev/gen/timing/qwen3_30b_a3b_preset.hpp"

#include "simdev/gen/timing/timing_calbin.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {
namespace {

// Weights (moe_weight_specs), 30,532,122,624 parameters in all:
//   per layer: attention q/k/v/o 18,874,368 + norms 4,352 + router 262,144
//              + 128 experts x 3 x 768 x 2048 = 603,979,776           -> 623,120,640
//   48 layers 29,909,790,720 + embeddings 311,164,928 + lm_head 311,164,928 + final norm 2,048.
// Stored: attention, router and lm_head int8 w8a8_dynamic; experts int4 w4af16 (groups of
// 128); embeddings and norms bf16. That is 16,347,983,872 bytes of weight data with each
// tensor counted once. Per chip: the replicated embeddings, norms and router plus half of
// everything else = 8,491,659,264 data bytes, plus 454,198,016 bytes of f32 scales.
constexpr const char* kWeightsNote =
    "timing-only, no weight files; attention q/k/v/o, router and lm_head int8 w8a8_dynamic "
    "(f32 row scales); experts stacked [experts, out, in] int4 w4af16 (f32 scale per group of "
    "128 inputs), split along the expert intermediate dimension; embeddings and norms bf16; "
    "router, embeddings and norms replicated";

}  // namespace

ModelConfig qwen3_30b_a3b_config() {
  ModelConfig c;
  c.architecture = "qwen3_moe";
  c.calbin_version_prefix = "qwen3-30b-a3b";
  // Neither name is a substring of the other, so no lookup by substring can confuse them.
  c.prefill_model = "qwen3_30b_a3b_prefill_c256";
  c.decode_model = "qwen3_30b_a3b_decode";
  c.runtime_abi = "0.7.6";
  c.layers = 48;
  c.hidden = 2048;
  c.q_heads = 32;
  c.kv_heads = 4;
  c.head_dim = 128;
  c.ffn = 768;  // moe_intermediate_size, per expert; there is no shared expert
  c.experts = 128;
  c.active_experts = 8;
  c.norm_topk_prob = true;
  // As moe_weight_specs declares them: int4 w4af16 experts, int8 w8a8_dynamic router and
  // lm_head.
  c.quant = {calbin::Dtype::kInt8, calbin::Dtype::kInt4, calbin::Dtype::kInt8};
  c.vocab = 151936;
  c.context = 40960;
  c.batch = 1;
  // 256 tokens per prefill submission: 160 chunks fill the context exactly, the chunk is a
  // multiple of the 16-wide output tile, and 256 x 8 expert picks already touch all 128
  // experts, so a larger chunk would only add activation workspace, not save weight reads.
  c.prefill_chunk = 256;
  c.chips = 2;
  c.logits_tile_d0 = 16;
  // The tokenizer declares more than the calbin holds; the usable limit is the smaller.
  c.tokenizer_context = 131072;
  c.rope_theta = 1e6;
  c.rms_eps = 1e-6;
  return c;
}

calbin::Result<calbin::Manifest> build_qwen3_30b_a3b(const GenOptions& options,
                                                     const std::filesystem::path& dir) {
  const ModelConfig config = qwen3_30b_a3b_config();
  return build_timing_only(config, moe_weight_specs(config), kWeightsNote, options, dir);
}

}  // namespace simdev::gen
