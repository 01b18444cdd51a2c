// Per-chip op lists of a Qwen3-MoE preset's prefill and decode graphs (the reference model,
// Qwen3-30B-A3B), with the FLOPs and DRAM bytes of each op for the chip's shard. Tensor
// parallel: both chips run every layer and hold a slice of every expert's intermediate
// dimension, so each chip's list is the same.
//
// The inventory per graph and chip matches the vendor's compiled graphs (REFERENCE.md):
//   flash_attention    1 per layer                                   = L
//   moe_grouped_dense  3 per layer: expert gate, up, down            = 3L
//   fused_rmsnorm      4 per layer: attn_norm, q_norm, k_norm,
//                      ffn_norm; plus final_norm                     = 4L + 1
//   quant_matmul_add   4 per layer: q_proj, kv_proj, o_proj (+ the
//                      residual add), router; plus lm_head           = 4L + 1
// For L = 48: 48, 144, 193, 193. q_proj and kv_proj are separate nodes because their
// outputs take different paths (Q to attention, K/V also to the cache write); that split is
// our reading of the 4-per-layer count, which the vendor does not document.
//
// Besides those, each layer has rope, moe_topk_router, silu_mul and two d2d_allreduce ops,
// and the graph an embedding, the lm_head and a d2d_gather: 17 * L + 4 = 820 ops for both
// graphs. The vendor graphs have 1496 (prefill) and 1398 (decode) nodes because their
// compiler also keeps casts, reshapes, per-token activation-quantisation nodes and the
// KV-cache scatter as nodes; here their bytes are counted in the op that consumes them, so
// the timing covers the same traffic with fewer records.
#pragma once

#include <cstdint>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen {

std::vector<calbin::ChipOps> moe_op_lists(const ModelConfig& config, calbin::ModelType type);

// Peak activation bytes one chip holds while running one submission, rounded up to 4 KiB.
uint64_t moe_workspace_bytes(const ModelConfig& config, calbin::ModelType type);

// Distinct experts one submission reads, an upper bound: every token picks active_experts
// distinct experts, so a submission touches at most min(experts, tokens * active_experts).
// A prefill chunk of 256 tokens makes 2048 picks from 128 experts and, with any plausible
// routing, reads all of them; one decode token reads exactly active_experts.
uint64_t touched_experts(const ModelConfig& config, calbin::ModelType type);

}  // namespace simdev::gen
