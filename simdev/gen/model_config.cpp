#include "simdev/gen/model_config.hpp"

#include <string>

namespace simdev::gen {
namespace {

struct Check {
  bool ok;
  const char* field;
  std::string why;
};

}  // namespace

calbin::Result<void> check_config(const ModelConfig& c) {
  const bool nonzero = c.layers > 0 && c.hidden > 0 && c.q_heads > 0 && c.kv_heads > 0 &&
                       c.head_dim > 0 && c.ffn > 0 && c.vocab > 0 && c.context > 0 && c.batch > 0 &&
                       c.prefill_chunk > 0 && c.chips > 0;
  if (!nonzero) {
    return calbin::fail("preset", "", "every model dimension must be non-zero");
  }
  const bool int4 = c.quant.experts == calbin::Dtype::kInt4;
  const uint32_t group = c.quant.group_size;
  // A w4af16 group never straddles a chip's slice of down_proj's inputs (MODEL.md).
  const bool groups_fit =
      group > 0 && group % 2 == 0 && c.hidden % group == 0 && (c.ffn / c.chips) % group == 0;
  const Check checks[] = {
      {c.chips <= 8, "chips", "at most 8 chips, got " + std::to_string(c.chips)},
      {c.q_heads % c.kv_heads == 0, "q_heads",
       "q_heads " + std::to_string(c.q_heads) + " is not a multiple of kv_heads " +
           std::to_string(c.kv_heads)},
      {c.q_heads % c.chips == 0 && c.kv_heads % c.chips == 0, "chips",
       "head counts must divide by the chip count " + std::to_string(c.chips)},
      {c.ffn % c.chips == 0, "ffn", "ffn must divide by the chip count " + std::to_string(c.chips)},
      {c.vocab % c.chips == 0, "vocab",
       "vocab must divide by the chip count " + std::to_string(c.chips)},
      {c.head_dim % 2 == 0, "head_dim",
       "RoPE needs an even head_dim, got " + std::to_string(c.head_dim)},
      {c.logits_tile_d0 > 0, "logits_tile_d0", "the logits tile must be non-zero"},
      {c.decode_top_k <= c.vocab / c.chips, "decode_top_k",
       std::to_string(c.decode_top_k) + " exceeds a chip's slice of the vocabulary (" +
           std::to_string(c.vocab / c.chips) + "), from which each chip ranks its candidates"},
      {c.prefill_chunk <= c.context, "prefill_chunk", "the prefill chunk exceeds the context"},
      {c.v_cache == calbin::Dtype::kBf16 || c.v_cache == calbin::Dtype::kInt8, "v_cache",
       std::string(calbin::to_string(c.v_cache)) + ": the V-cache holds bf16 or int8"},
      {(c.experts == 0) == (c.active_experts == 0) && c.active_experts <= c.experts,
       "active_experts",
       std::to_string(c.active_experts) + " active of " + std::to_string(c.experts) +
           " experts: need 1..experts active, or neither for a dense model"},
      {c.quant.experts == calbin::Dtype::kInt8 || int4, "quant.experts",
       std::string(calbin::to_string(c.quant.experts)) + ": experts are int8 or int4"},
      {!int4 || groups_fit, "quant.group_size",
       std::to_string(group) + " must be even and divide hidden " + std::to_string(c.hidden) +
           " and each chip's expert slice " + std::to_string(c.ffn / c.chips)},
  };
  for (const Check& check : checks) {
    if (!check.ok) {
      return calbin::fail("preset", check.field, check.why);
    }
  }
  return {};
}

}  // namespace simdev::gen
