#include "simdev/gen/timing/moe_op_list.hpp"

#include <algorithm>
#include <string>

#include "simdev/gen/timing/op_builders.hpp"
#include "simdev/gen/weights/quantize.hpp"

namespace simdev::gen {
namespace {

using ops::ChipShape;
using ops::kActBytes;
using ops::kF32Bytes;

// One grouped GEMM over the token-expert pairs of a submission ("moe_grouped_dense"): rows
// = tokens x active_experts over each touched expert's [out, in] shard. Int4 w4af16 weights
// carry one f32 scale per group of input elements and the math runs in 16 bits on
// dequantised weights (the "AF16"), so the op is costed at the 16-bit peak; int8
// w8a8_dynamic weights carry one f32 scale per row and run at the int8 peak.
calbin::Op grouped_dense(std::string name, int layer, uint64_t rows, uint64_t touched, uint64_t out,
                         uint64_t in, calbin::Dtype weights) {
  const bool int4 = weights == calbin::Dtype::kInt4;
  const uint64_t expert_bytes =
      int4 ? out * in / 2 + out * (in / kW4af16GroupSize) * kF32Bytes : out * in + out * kF32Bytes;
  const uint64_t bytes = touched * expert_bytes + rows * (in + out) * kActBytes;
  calbin::Op made =
      ops::op("moe_grouped_dense", std::move(name), layer, ops::dims({rows, out, in}),
              int4 ? calbin::Dtype::kF16 : calbin::Dtype::kInt8, 2 * rows * out * in, bytes);
  // The timing model rescales these to the experts a submission of any length touches.
  made.weight_bytes = touched * expert_bytes;
  made.experts = static_cast<uint32_t>(touched);
  return made;
}

// Softmax over the router logits and the top-k pick; writes expert ids and weights.
calbin::Op topk_router(std::string name, int layer, const ChipShape& s) {
  const uint64_t logits = s.tokens * s.experts;
  return ops::op("moe_topk_router", std::move(name), layer, ops::dims({s.tokens, s.experts}),
                 calbin::Dtype::kF32, 6 * logits,
                 logits * kF32Bytes + s.tokens * s.active_experts * 2 * kF32Bytes);
}

void add_moe_attention(const std::string& p, int l, const ChipShape& s,
                       std::vector<calbin::Op>& out) {
  out.push_back(ops::rmsnorm(p + "attn_norm", l, s.tokens, s.hidden));
  out.push_back(ops::quant_matmul(p + "q_proj", l, s.tokens, s.q_heads * s.head_dim, s.hidden));
  out.push_back(
      ops::quant_matmul(p + "kv_proj", l, s.tokens, 2 * s.kv_heads * s.head_dim, s.hidden));
  out.push_back(ops::rmsnorm(p + "q_norm", l, s.tokens * s.q_heads, s.head_dim));
  out.push_back(ops::rmsnorm(p + "k_norm", l, s.tokens * s.kv_heads, s.head_dim));
  out.push_back(ops::rope(p + "rope", l, s));
  out.push_back(ops::flash_attention(p + "attention", l, s));
  out.push_back(ops::quant_matmul(p + "o_proj", l, s.tokens, s.hidden, s.q_heads * s.head_dim));
  out.push_back(ops::allreduce(p + "attn_allreduce", l, s));
}

// The router weights are replicated, so both chips route every token identically and each
// runs its slice of the same experts. The down GEMM's epilogue applies the routing weights
// and sums a token's experts, leaving the chip's FP32 partial for the all-reduce.
void add_moe(const std::string& p, int l, const ChipShape& s, uint64_t touched,
             const ModelConfig& c, std::vector<calbin::Op>& out) {
  const uint64_t pairs = s.tokens * s.active_experts;
  const calbin::Dtype w = c.quant.experts;
  out.push_back(ops::rmsnorm(p + "ffn_norm", l, s.tokens, s.hidden));
  out.push_back(ops::matmul(p + "router", l, s.tokens, s.experts, s.hidden, c.quant.router));
  out.push_back(topk_router(p + "topk", l, s));
  out.push_back(grouped_dense(p + "experts.gate", l, pairs, touched, s.ffn, s.hidden, w));
  out.push_back(grouped_dense(p + "experts.up", l, pairs, touched, s.ffn, s.hidden, w));
  out.push_back(ops::silu_mul(p + "experts.silu_mul", l, pairs, s.ffn));
  out.push_back(grouped_dense(p + "experts.down", l, pairs, touched, s.hidden, s.ffn, w));
  out.push_back(ops::allreduce(p + "mlp_allreduce", l, s));
}

}  // namespace

uint64_t touched_experts(const ModelConfig& config, calbin::ModelType type) {
  const ChipShape s = ops::chip_shape(config, type);
  return std::min<uint64_t>(s.experts, s.tokens * s.active_experts);
}

std::vector<calbin::ChipOps> moe_op_lists(const ModelConfig& config, calbin::ModelType type) {
  const ChipShape s = ops::chip_shape(config, type);
  const uint64_t touched = touched_experts(config, type);
  std::vector<calbin::Op> list;
  list.push_back(ops::embedding(s));
  for (uint32_t l = 0; l < config.layers; ++l) {
    const std::string prefix = "layers." + std::to_string(l) + ".";
    add_moe_attention(prefix, static_cast<int>(l), s, list);
    add_moe(prefix, static_cast<int>(l), s, touched, config, list);
  }
  ops::add_head(s, config.quant.lm_head, list);
  return ops::on_every_chip(list, config.chips);
}

uint64_t moe_workspace_bytes(const ModelConfig& config, calbin::ModelType type) {
  const ChipShape s = ops::chip_shape(config, type);
  // Live at the peak (the experts): the f32 residual and partial sum, the normed input, the
  // q/k/v slice kept for attention, the router logits, and per token-expert pair the
  // gate/up/product slices and the f32 expert output before the combine; plus the logits
  // half.
  const uint64_t per_pair = 3 * s.ffn * kActBytes + s.hidden * kF32Bytes;
  const uint64_t per_token = 2 * s.hidden * kF32Bytes + s.hidden * kActBytes +
                             (s.q_heads + 2 * s.kv_heads) * s.head_dim * kActBytes +
                             s.experts * kF32Bytes + s.active_experts * per_pair;
  return ops::round_up_to_page(s.tokens * per_token + s.vocab * kF32Bytes);
}

}  // namespace simdev::gen
