// The shape of a functional calbin's model (calbin/MODEL.md) plus the packaging facts a
// preset chooses: names, chip count, chunk size, context.
#pragma once

#include <cstdint>
#include <string>

#include "calbin/manifest.hpp"
#include "calbin/result.hpp"
#include "simdev/gen/weights/quantize.hpp"

namespace simdev::gen {

struct ModelConfig {
  std::string architecture = "qwen3";
  std::string calbin_version_prefix = "tiny";
  std::string prefill_model = "qwen3_tiny_prefill_c256";
  std::string decode_model = "qwen3_tiny_decode";
  std::string runtime_abi = "0.7.6";
  uint32_t layers = 2;
  uint32_t hidden = 128;
  uint32_t q_heads = 4;
  uint32_t kv_heads = 2;
  uint32_t head_dim = 32;
  uint32_t ffn = 256;    // MoE: the intermediate size of one expert
  uint32_t experts = 0;  // 0: dense MLP
  uint32_t active_experts = 0;
  bool norm_topk_prob = false;  // MoE: renormalise the top-k routing weights (Hugging Face)
  // What the modules that differ between calbins are stored as (the reference's
  // per-module quantization table). Functional calbins hold a bf16 router and lm_head and
  // int8 w8a8_dynamic or int4 w4af16 experts (calbin/MODEL.md); the timing-only reference
  // preset declares int4 w4af16 experts and an int8 router and lm_head. The op lists charge
  // what is declared.
  struct ModuleQuant {
    calbin::Dtype router = calbin::Dtype::kBf16;
    calbin::Dtype experts = calbin::Dtype::kInt8;
    calbin::Dtype lm_head = calbin::Dtype::kBf16;
    uint32_t group_size = kW4af16GroupSize;  // int4 experts: inputs per scale
  } quant;
  uint32_t vocab = 1000;
  uint32_t context = 4608;
  uint32_t batch = 1;
  uint32_t prefill_chunk = 256;
  uint32_t chips = 2;
  uint32_t logits_tile_d0 = 16;
  // 0: the decode gives each row's full logits. K > 0: it ranks on the device and gives
  // each row's K best ids and their logits (calrt.h, CALRT_ROLE_TOP_IDS), K * 6 bytes a row
  // over PCIe instead of the vocabulary's 2 * V.
  uint32_t decode_top_k = 0;
  uint32_t tokenizer_context = 32768;
  double rope_theta = 1e6;
  double rms_eps = 1e-6;
  bool tied_embeddings = false;  // lm_head is the embedding (tie_word_embeddings)
  // The V-cache's element type: bf16, or int8 with one FP32 scale per slot and KV head (the
  // reference's S8 V-cache option; calbin/MODEL.md, "The device contract"). K stays BF16.
  calbin::Dtype v_cache = calbin::Dtype::kBf16;
  // How seeded weights are drawn. kGaussian: every tensor Gaussian. kTrained: the statistics
  // that dominate a trained LLM's W8A8 error (weights.cpp, "trained-like weights"): matrices
  // heavy-tailed, and a few hidden channels whose activations stand two orders of magnitude
  // above the rest.
  enum class WeightInit { kGaussian, kTrained };
  WeightInit weight_init = WeightInit::kGaussian;
  // kTrained: how far the outlier channels stand above the others at the matmuls' inputs.
  double outlier_gain = 10.0;
};

// Checks what the generator and MODEL.md rely on: non-zero sizes, every split dimension
// divisible by the chip count, GQA groups that divide evenly, an even head size for RoPE,
// and for MoE between 1 and `experts` active experts.
calbin::Result<void> check_config(const ModelConfig& config);

}  // namespace simdev::gen
