// Deliberate one-line numeric defects of the device: the negative controls of the smoke's
// numeric gates (runner/README.md, "Calibration of the numeric gates"). Each is a mistake a
// kernel or a compiler could make; the smoke must fail every one of them on every seed, and
// pass the unmodified device. Test only: `numerics_mutant=NAME` in the device config.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace simdev {

enum class NumericsMutant : uint8_t {
  none,
  logits_scale,             // logits x 1.02
  q_norm_ignored,           // the q_norm weight not applied (plain RMS normalisation)
  k_norm_ignored,           // the k_norm weight not applied
  rope_interleaved,         // RoPE pairs (2i, 2i+1) instead of (i, i + D/2)
  rope_theta,               // RoPE theta 100x too small
  rms_eps,                  // rms eps 1e4x too large
  gqa_mapping,              // query head h reads KV head h % kv_heads instead of h / group
  kv_slot_off,              // the KV of a token written one slot early (the last slot stays stale)
  lm_head_swapped,          // the two chips' halves of the vocabulary swapped
  act_per_tensor,           // activations quantised with one scale per tensor, not per token
  attn_unscaled,            // attention scores not divided by sqrt(head_dim)
  kv_truncated,             // the BF16 KV cache rounded by truncation instead of to nearest even
  silu_as_relu,             // the MLP's SiLU computed as ReLU
  v_cache_bf16,             // an int8 V-cache kept in BF16 (the calbin's v_dtype ignored)
  router_unnormalised,      // MoE: the top-k weights not renormalised (norm_topk_prob ignored)
  expert_weights_reversed,  // MoE: a token's routing weights applied to its experts reversed
  int4_nibbles_swapped,     // w4af16: a byte's two weights read high nibble first
  batch_rows_rotated,       // batch decode: row r's logits written to row r + 1 (the last to 0)
  batch_pads_kept,          // batch decode: the rows past cur_seq_len hold the last live row's
                            // logits (a batch padded by repeating its last sequence, the pads
                            // not cleared)
  top_k_local_ids,          // on-device top-k: a chip's candidates keep their ids local to its
                            // slice of the vocabulary (chip 0's are right by luck)
  top_k_one_chip,           // on-device top-k: the merge keeps chip 0's candidates only
};

inline constexpr std::array<std::string_view, 22> kNumericsMutantNames = {"none",
                                                                          "logits_scale",
                                                                          "q_norm_ignored",
                                                                          "k_norm_ignored",
                                                                          "rope_interleaved",
                                                                          "rope_theta",
                                                                          "rms_eps",
                                                                          "gqa_mapping",
                                                                          "kv_slot_off",
                                                                          "lm_head_swapped",
                                                                          "act_per_tensor",
                                                                          "attn_unscaled",
                                                                          "kv_truncated",
                                                                          "silu_as_relu",
                                                                          "v_cache_bf16",
                                                                          "router_unnormalised",
                                                                          "expert_weights_reversed",
                                                                          "int4_nibbles_swapped",
                                                                          "batch_rows_rotated",
                                                                          "batch_pads_kept",
                                                                          "top_k_local_ids",
                                                                          "top_k_one_chip"};

}  // namespace simdev
