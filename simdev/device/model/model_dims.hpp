// The functional model's dimensions (calbin/MODEL.md) and each chip's share of them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "calbin/manifest.hpp"
#include "simdev/device/base/status.hpp"

namespace simdev {

struct ModelDims {
  size_t layers = 0;
  size_t hidden = 0;
  size_t q_heads = 0;
  size_t kv_heads = 0;
  size_t head_dim = 0;
  size_t ffn = 0;      // MoE: one expert's intermediate size
  size_t experts = 0;  // 0: a dense MLP
  size_t active_experts = 0;
  bool norm_topk_prob = false;
  size_t vocab = 0;
  size_t chips = 1;
  double rms_eps = 1e-6;  // as the manifest gives it: the norms add it in double
  double rope_theta = 10000.0;
  // V-cache in int8 with one FP32 scale per (slot, KV head) (calbin/MODEL.md); else BF16.
  bool v_int8 = false;

  // Per chip: the heads, FFN columns and vocabulary rows one chip holds.
  size_t q_heads_local() const { return q_heads / chips; }
  size_t kv_heads_local() const { return kv_heads / chips; }
  size_t ffn_local() const { return ffn / chips; }
  size_t vocab_local() const { return vocab / chips; }
  size_t group_size() const { return q_heads / kv_heads; }  // query heads per KV head
};

// Reads and checks the dimensions: non-zero, split ones divisible by the chip count, GQA
// grouping whole, head_dim even (RoPE pairs). CALBIN_INVALID names the field and value.
Expected<ModelDims> model_dims(const calbin::Manifest& manifest);

}  // namespace simdev
