#include "simdev/gen/op_list.hpp"

#include <string>

namespace simdev::gen {
namespace {

constexpr uint64_t kActBytes = 2;  // bf16 activations between ops
constexpr uint64_t kF32Bytes = 4;

// The per-chip sizes one submission works on.
struct ChipShape {
  uint64_t tokens = 0;     // rows processed by the layer stack
  uint64_t key_pairs = 0;  // (query, key) pairs per head in attention
  uint64_t kv_slots = 0;   // KV slots attention reads
  uint64_t hidden = 0, head_dim = 0, q_heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
};

ChipShape chip_shape(const ModelConfig& c, calbin::ModelType type) {
  ChipShape s;
  const bool prefill = type == calbin::ModelType::kPrefill;
  s.tokens = prefill ? c.prefill_chunk : 1;
  s.key_pairs = prefill ? s.tokens * (s.tokens + 1) / 2 : c.context;
  s.kv_slots = prefill ? s.tokens : c.context;
  s.hidden = c.hidden;
  s.head_dim = c.head_dim;
  s.q_heads = c.q_heads / c.chips;
  s.kv_heads = c.kv_heads / c.chips;
  s.ffn = c.ffn / c.chips;
  s.vocab = c.vocab / c.chips;
  return s;
}

calbin::Op op(std::string type, std::string name, int layer, std::vector<int64_t> shape,
              calbin::Dtype dtype, uint64_t flops, uint64_t bytes) {
  return calbin::Op{std::move(type), std::move(name), layer, std::move(shape), dtype, flops, bytes};
}

std::vector<int64_t> dims(std::initializer_list<uint64_t> values) {
  std::vector<int64_t> out;
  for (const uint64_t v : values) {
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

// int8 weights with f32 row scales; activations in and out.
calbin::Op quant_matmul(std::string name, int layer, const ChipShape& s, uint64_t out,
                        uint64_t in) {
  const uint64_t bytes = out * in + out * kF32Bytes + s.tokens * (in + out) * kActBytes;
  return op("quant_matmul_add", std::move(name), layer, dims({s.tokens, out, in}),
            calbin::Dtype::kInt8, 2 * s.tokens * out * in, bytes);
}

calbin::Op rmsnorm(std::string name, int layer, uint64_t rows, uint64_t width) {
  return op("fused_rmsnorm", std::move(name), layer, dims({rows, width}), calbin::Dtype::kBf16,
            4 * rows * width, (2 * rows * width + width) * kActBytes);
}

calbin::Op allreduce(std::string name, int layer, const ChipShape& s) {
  const uint64_t elements = s.tokens * s.hidden;
  return op("d2d_allreduce", std::move(name), layer, dims({s.tokens, s.hidden}),
            calbin::Dtype::kF32, elements, 2 * elements * kF32Bytes);
}

void add_attention(const std::string& p, int l, const ChipShape& s, std::vector<calbin::Op>& ops) {
  const uint64_t qkv_out = (s.q_heads + 2 * s.kv_heads) * s.head_dim;
  const uint64_t rotated = (s.q_heads + s.kv_heads) * s.head_dim;
  ops.push_back(rmsnorm(p + "attn_norm", l, s.tokens, s.hidden));
  ops.push_back(quant_matmul(p + "qkv_proj", l, s, qkv_out, s.hidden));
  // The per-head q/k RMSNorm is fused into the rope op, so its cost is counted there.
  ops.push_back(op("rope", p + "rope", l, dims({s.tokens, s.q_heads + s.kv_heads, s.head_dim}),
                   calbin::Dtype::kBf16, 10 * s.tokens * rotated,
                   2 * s.tokens * rotated * kActBytes));
  const uint64_t kv_bytes = 2 * s.kv_heads * s.head_dim * s.kv_slots * kActBytes;
  const uint64_t q_o_bytes = 2 * s.tokens * s.q_heads * s.head_dim * kActBytes;
  ops.push_back(op("flash_attention", p + "attention", l, dims({s.tokens, s.q_heads, s.head_dim}),
                   calbin::Dtype::kBf16, 4 * s.key_pairs * s.q_heads * s.head_dim,
                   kv_bytes + q_o_bytes));
  ops.push_back(quant_matmul(p + "o_proj", l, s, s.hidden, s.q_heads * s.head_dim));
  ops.push_back(allreduce(p + "attn_allreduce", l, s));
}

void add_mlp(const std::string& p, int l, const ChipShape& s, std::vector<calbin::Op>& ops) {
  ops.push_back(rmsnorm(p + "ffn_norm", l, s.tokens, s.hidden));
  ops.push_back(quant_matmul(p + "gate_up_proj", l, s, 2 * s.ffn, s.hidden));
  ops.push_back(op("silu_mul", p + "silu_mul", l, dims({s.tokens, s.ffn}), calbin::Dtype::kBf16,
                   5 * s.tokens * s.ffn, 3 * s.tokens * s.ffn * kActBytes));
  ops.push_back(quant_matmul(p + "down_proj", l, s, s.hidden, s.ffn));
  ops.push_back(allreduce(p + "mlp_allreduce", l, s));
}

// Only the last token's logits leave the device, so the head runs on one row.
void add_head(const ChipShape& s, std::vector<calbin::Op>& ops) {
  ops.push_back(rmsnorm("final_norm", -1, 1, s.hidden));
  ops.push_back(op("matmul", "lm_head", -1, dims({1, s.vocab, s.hidden}), calbin::Dtype::kBf16,
                   2 * s.vocab * s.hidden, (s.vocab * s.hidden + s.hidden + s.vocab) * kActBytes));
  const uint64_t full_vocab = s.vocab * 2;
  ops.push_back(op("d2d_gather", "logits_gather", -1, dims({1, full_vocab}), calbin::Dtype::kBf16,
                   0, 2 * full_vocab * kActBytes));
}

}  // namespace

std::vector<calbin::ChipOps> op_lists(const ModelConfig& config, calbin::ModelType type) {
  const ChipShape s = chip_shape(config, type);
  std::vector<calbin::Op> ops;
  ops.push_back(op("embedding", "embedding", -1, dims({s.tokens, s.hidden}), calbin::Dtype::kBf16,
                   0, s.tokens * (4 + 2 * s.hidden * kActBytes)));
  for (uint32_t l = 0; l < config.layers; ++l) {
    const std::string prefix = "layers." + std::to_string(l) + ".";
    add_attention(prefix, static_cast<int>(l), s, ops);
    add_mlp(prefix, static_cast<int>(l), s, ops);
  }
  add_head(s, ops);
  std::vector<calbin::ChipOps> chips;
  for (uint32_t chip = 0; chip < config.chips; ++chip) {
    chips.push_back({chip, ops});
  }
  return chips;
}

uint64_t workspace_bytes(const ModelConfig& config, calbin::ModelType type) {
  const ChipShape s = chip_shape(config, type);
  // Live at the peak (the MLP): the f32 residual and partial sum, the normed input, the
  // attention output kept for o_proj, gate/up and their product, plus the logits half.
  const uint64_t per_token = 2 * s.hidden * kF32Bytes + s.hidden * kActBytes +
                             (s.q_heads + 2 * s.kv_heads) * s.head_dim * kActBytes +
                             3 * s.ffn * kActBytes;
  const uint64_t total = s.tokens * per_token + s.vocab * kF32Bytes;
  constexpr uint64_t kPage = 4096;
  return (total + kPage - 1) / kPage * kPage;
}

}  // namespace simdev::gen
