// `simdev gen --config FILE`: a model's shape from a file instead of a preset.
//   - A Hugging Face config.json of the Qwen3 (model_type qwen3), Qwen3-MoE (qwen3_moe) or
//     Llama (llama) families, as it ships next to the weights. The calbin's packaging (chips,
//     context, prefill chunk) takes the defaults below; its name comes from the file's
//     directory (Qwen3-0.6B/config.json -> qwen3_0_6b).
//   - The project's YAML: `name`, optionally `hf_config` (a config.json, relative to the YAML
//     file) to start from, and any ModelConfig field by its name to set or override (layers,
//     hidden, q_heads, kv_heads, head_dim, ffn, experts, active_experts, vocab, context,
//     batch, prefill_chunk, chips, logits_tile_d0, tokenizer_context, rope_theta, rms_eps).
// A dense model becomes a functional calbin (seeded weights, golden set); a mixture of
// experts a timing-only one, as the reference MoE preset. What the simulator does not model
// (RoPE scaling, attention biases, activations other than SiLU, sliding windows, MoE layers
// mixed with dense ones) is refused by name, never approximated. Every error names the file,
// the field and the value.
#pragma once

#include <filesystem>

#include "calbin/result.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen {

// The packaging a config.json does not say.
inline constexpr uint32_t kDefaultConfigChips = 2;
inline constexpr uint32_t kDefaultConfigChunk = 256;
inline constexpr uint32_t kDefaultConfigContext = 4608;  // capped by max_position_embeddings

calbin::Result<ModelConfig> read_model_config(const std::filesystem::path& path);

}  // namespace simdev::gen
