#include "simdev/gen/timing/op_builders.hpp"

#include <algorithm>

namespace simdev::gen::ops {

ChipShape chip_shape(const ModelConfig& c, calbin::ModelType type) {
  ChipShape s;
  const bool prefill = type == calbin::ModelType::kPrefill;
  // A batch decode lists its rows as a chunk would: `batch` queries, the last one reading
  // the full context (the cost model rescales it as rows of their own, cost_model.cpp).
  s.tokens = prefill ? c.prefill_chunk : c.batch;
  s.head_rows = prefill ? 1 : c.batch;
  s.kv_slots = prefill ? s.tokens : c.context;
  const uint64_t listed_past = s.kv_slots - std::min(s.kv_slots, s.tokens);
  s.key_pairs = s.tokens * listed_past + s.tokens * (s.tokens + 1) / 2;
  s.hidden = c.hidden;
  s.head_dim = c.head_dim;
  s.q_heads = c.q_heads / c.chips;
  s.kv_heads = c.kv_heads / c.chips;
  s.ffn = c.ffn / c.chips;
  s.vocab = c.vocab / c.chips;
  s.experts = c.experts;
  s.active_experts = c.active_experts;
  s.kv_head_slot_bytes = calbin::kv_head_slot_bits(calbin::Dtype::kBf16, c.v_cache, c.head_dim) / 8;
  s.chips = c.chips;
  s.top_k = prefill ? 0 : c.decode_top_k;
  return s;
}

std::vector<int64_t> dims(std::initializer_list<uint64_t> values) {
  std::vector<int64_t> out;
  for (const uint64_t v : values) {
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

calbin::Op op(std::string type, std::string name, int layer, std::vector<int64_t> shape,
              calbin::Dtype dtype, uint64_t flops, uint64_t bytes) {
  return calbin::Op{std::move(type), std::move(name), layer, std::move(shape), dtype, flops, bytes};
}

calbin::Op quant_matmul(std::string name, int layer, uint64_t rows, uint64_t out, uint64_t in) {
  const uint64_t weights = out * in + out * kF32Bytes;
  calbin::Op made =
      op("quant_matmul_add", std::move(name), layer, dims({rows, out, in}), calbin::Dtype::kInt8,
         2 * rows * out * in, weights + rows * (in + out) * kActBytes);
  made.weight_bytes = weights;
  return made;
}

calbin::Op matmul(std::string name, int layer, uint64_t rows, uint64_t out, uint64_t in,
                  calbin::Dtype weights) {
  if (weights == calbin::Dtype::kInt8) {
    return quant_matmul(std::move(name), layer, rows, out, in);
  }
  calbin::Op made =
      op("matmul", std::move(name), layer, dims({rows, out, in}), calbin::Dtype::kBf16,
         2 * rows * out * in, (out * in + rows * (in + out)) * kActBytes);
  made.weight_bytes = out * in * kActBytes;
  return made;
}

calbin::Op rmsnorm(std::string name, int layer, uint64_t rows, uint64_t width) {
  calbin::Op made =
      op("fused_rmsnorm", std::move(name), layer, dims({rows, width}), calbin::Dtype::kBf16,
         4 * rows * width, (2 * rows * width + width) * kActBytes);
  made.weight_bytes = width * kActBytes;  // the norm's gain vector
  return made;
}

calbin::Op rope(std::string name, int layer, const ChipShape& s) {
  const uint64_t rotated = (s.q_heads + s.kv_heads) * s.head_dim;
  return op("rope", std::move(name), layer, dims({s.tokens, s.q_heads + s.kv_heads, s.head_dim}),
            calbin::Dtype::kBf16, 10 * s.tokens * rotated, 2 * s.tokens * rotated * kActBytes);
}

calbin::Op flash_attention(std::string name, int layer, const ChipShape& s) {
  const uint64_t kv_bytes = s.kv_heads * s.kv_slots * s.kv_head_slot_bytes;
  const uint64_t q_o_bytes = 2 * s.tokens * s.q_heads * s.head_dim * kActBytes;
  calbin::Op made =
      op("flash_attention", std::move(name), layer, dims({s.tokens, s.q_heads, s.head_dim}),
         calbin::Dtype::kBf16, 4 * s.key_pairs * s.q_heads * s.head_dim, kv_bytes + q_o_bytes);
  made.kv_bytes = kv_bytes;
  made.kv_slots = s.kv_slots;
  return made;
}

calbin::Op silu_mul(std::string name, int layer, uint64_t rows, uint64_t width) {
  return op("silu_mul", std::move(name), layer, dims({rows, width}), calbin::Dtype::kBf16,
            5 * rows * width, 3 * rows * width * kActBytes);
}

calbin::Op allreduce(std::string name, int layer, const ChipShape& s) {
  const uint64_t elements = s.tokens * s.hidden;
  return op("d2d_allreduce", std::move(name), layer, dims({s.tokens, s.hidden}),
            calbin::Dtype::kF32, elements, 2 * elements * kF32Bytes);
}

calbin::Op embedding(const ChipShape& s) {
  return op("embedding", "embedding", -1, dims({s.tokens, s.hidden}), calbin::Dtype::kBf16, 0,
            s.tokens * (4 + 2 * s.hidden * kActBytes));
}

calbin::Op logits_gather(const ChipShape& s) {
  const uint64_t full_vocab = s.vocab * s.chips;
  return op("d2d_gather", "logits_gather", -1, dims({s.head_rows, full_vocab}),
            calbin::Dtype::kBf16, 0, 2 * s.head_rows * full_vocab * kActBytes);
}

// Each chip ranks its slice of the vocabulary; chip 0 merges the chips' candidates (a merge
// of sorted lists, counted here as one compare per candidate). A candidate crosses the
// link as an (id, value) pair of 32-bit words.
calbin::Op top_k(const ChipShape& s) {
  const uint64_t candidates = s.chips * s.top_k;
  return op("top_k", "top_k", -1, dims({s.head_rows, s.vocab}), calbin::Dtype::kBf16,
            s.head_rows * (s.vocab + candidates),
            s.head_rows * (s.vocab * kActBytes + s.top_k * (sizeof(int32_t) + kActBytes)));
}

calbin::Op candidates_gather(const ChipShape& s) {
  const uint64_t candidates = s.chips * s.top_k;
  return op("d2d_gather", "top_k_gather", -1, dims({s.head_rows, candidates, 2}),
            calbin::Dtype::kInt32, 0, 2 * s.head_rows * candidates * 2 * sizeof(int32_t));
}

void add_head(const ChipShape& s, calbin::Dtype lm_head, std::vector<calbin::Op>& out) {
  out.push_back(rmsnorm("final_norm", -1, s.head_rows, s.hidden));
  out.push_back(matmul("lm_head", -1, s.head_rows, s.vocab, s.hidden, lm_head));
  if (s.top_k == 0) {
    out.push_back(logits_gather(s));
    return;
  }
  out.push_back(top_k(s));
  out.push_back(candidates_gather(s));
}

std::vector<calbin::ChipOps> on_every_chip(const std::vector<calbin::Op>& ops, uint32_t chips) {
  std::vector<calbin::ChipOps> out;
  for (uint32_t chip = 0; chip < chips; ++chip) {
    out.push_back({chip, ops});
  }
  return out;
}

uint64_t round_up_to_page(uint64_t bytes) {
  constexpr uint64_t kPage = 4096;
  return (bytes + kPage - 1) / kPage * kPage;
}

}  // namespace simdev::gen::ops
