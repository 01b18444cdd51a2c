#include "simdev/gen/timing/op_list.hpp"

#include <string>

#include "simdev/gen/timing/op_builders.hpp"

namespace simdev::gen {
namespace {

using ops::ChipShape;
using ops::kActBytes;
using ops::kF32Bytes;

void add_attention(const std::string& p, int l, const ChipShape& s, std::vector<calbin::Op>& out) {
  const uint64_t qkv_out = (s.q_heads + 2 * s.kv_heads) * s.head_dim;
  out.push_back(ops::rmsnorm(p + "attn_norm", l, s.tokens, s.hidden));
  out.push_back(ops::quant_matmul(p + "qkv_proj", l, s.tokens, qkv_out, s.hidden));
  // The per-head q/k RMSNorm is fused into the rope op, so its cost is counted there.
  out.push_back(ops::rope(p + "rope", l, s));
  out.push_back(ops::flash_attention(p + "attention", l, s));
  out.push_back(ops::quant_matmul(p + "o_proj", l, s.tokens, s.hidden, s.q_heads * s.head_dim));
  out.push_back(ops::allreduce(p + "attn_allreduce", l, s));
}

void add_mlp(const std::string& p, int l, const ChipShape& s, std::vector<calbin::Op>& out) {
  out.push_back(ops::rmsnorm(p + "ffn_norm", l, s.tokens, s.hidden));
  out.push_back(ops::quant_matmul(p + "gate_up_proj", l, s.tokens, 2 * s.ffn, s.hidden));
  out.push_back(ops::silu_mul(p + "silu_mul", l, s.tokens, s.ffn));
  out.push_back(ops::quant_matmul(p + "down_proj", l, s.tokens, s.hidden, s.ffn));
  out.push_back(ops::allreduce(p + "mlp_allreduce", l, s));
}

}  // namespace

std::vector<calbin::ChipOps> op_lists(const ModelConfig& config, calbin::ModelType type) {
  const ChipShape s = ops::chip_shape(config, type);
  std::vector<calbin::Op> list;
  list.push_back(ops::embedding(s));
  for (uint32_t l = 0; l < config.layers; ++l) {
    const std::string prefix = "layers." + std::to_string(l) + ".";
    add_attention(prefix, static_cast<int>(l), s, list);
    add_mlp(prefix, static_cast<int>(l), s, list);
  }
  ops::add_head(s, config.quant.lm_head, list);
  return ops::on_every_chip(list, config.chips);
}

uint64_t workspace_bytes(const ModelConfig& config, calbin::ModelType type) {
  const ChipShape s = ops::chip_shape(config, type);
  // Live at the peak (the MLP): the f32 residual and partial sum, the normed input, the
  // attention output kept for o_proj, gate/up and their product, plus the logits half.
  const uint64_t per_token = 2 * s.hidden * kF32Bytes + s.hidden * kActBytes +
                             (s.q_heads + 2 * s.kv_heads) * s.head_dim * kActBytes +
                             3 * s.ffn * kActBytes;
  return ops::round_up_to_page(s.tokens * per_token + s.vocab * kF32Bytes);
}

}  // namespace simdev::gen
