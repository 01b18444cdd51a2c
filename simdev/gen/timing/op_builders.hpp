// The op records both op lists (dense: op_list.hpp, MoE: moe_op_list.hpp) are made of, with
// their FLOP and DRAM-byte formulas in one place, so the two model families are costed
// alike. Every figure is per chip: the caller passes the chip's shard sizes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen::ops {

inline constexpr uint64_t kActBytes = 2;  // bf16 activations between ops
inline constexpr uint64_t kF32Bytes = 4;

// The per-chip sizes one submission works on.
struct ChipShape {
  uint64_t tokens = 0;     // rows processed by the layer stack
  uint64_t head_rows = 1;  // rows whose logits the head computes: a decode's batch
  uint64_t key_pairs = 0;  // (query, key) pairs per head in attention
  uint64_t kv_slots = 0;   // KV slots attention reads
  uint64_t hidden = 0, head_dim = 0, q_heads = 0, kv_heads = 0, ffn = 0, vocab = 0;
  uint64_t experts = 0, active_experts = 0;  // every chip holds a shard of every expert
  uint64_t kv_head_slot_bytes = 0;  // one KV head's K and V at one slot (kv_head_slot_bits)
  uint64_t chips = 1;
  uint64_t top_k = 0;  // a decode that ranks on the device: candidates per row and chip
};

// Prefill: one full chunk attending causally within itself; decode: one token per batch row
// reading the KV of the full context.
ChipShape chip_shape(const ModelConfig& config, calbin::ModelType type);

std::vector<int64_t> dims(std::initializer_list<uint64_t> values);
calbin::Op op(std::string type, std::string name, int layer, std::vector<int64_t> shape,
              calbin::Dtype dtype, uint64_t flops, uint64_t bytes);

// "quant_matmul_add": int8 weights [out, in] with f32 row scales, `rows` activation rows in
// and out; the residual add, where there is one, is fused and moves no extra bytes.
calbin::Op quant_matmul(std::string name, int layer, uint64_t rows, uint64_t out, uint64_t in);
// A matmul with weights stored as `weights`: int8 is quant_matmul(); bf16 weights are read
// as they are and accumulated in FP32 ("matmul").
calbin::Op matmul(std::string name, int layer, uint64_t rows, uint64_t out, uint64_t in,
                  calbin::Dtype weights);
calbin::Op rmsnorm(std::string name, int layer, uint64_t rows, uint64_t width);
// RoPE over the chip's query and KV heads.
calbin::Op rope(std::string name, int layer, const ChipShape& s);
calbin::Op flash_attention(std::string name, int layer, const ChipShape& s);
calbin::Op silu_mul(std::string name, int layer, uint64_t rows, uint64_t width);
// The FP32 partial sums of the hidden state, exchanged with the other chip and added.
calbin::Op allreduce(std::string name, int layer, const ChipShape& s);
calbin::Op embedding(const ChipShape& s);
// Gathers the chips' logits halves into the full row on chip 0.
calbin::Op logits_gather(const ChipShape& s);

// The head: final norm and lm_head on one row (only the last token's logits leave the
// device), then the gather of the chips' vocabulary slices.
void add_head(const ChipShape& s, calbin::Dtype lm_head, std::vector<calbin::Op>& out);

// The same op list on every chip: tensor parallel runs every layer on every chip.
std::vector<calbin::ChipOps> on_every_chip(const std::vector<calbin::Op>& ops, uint32_t chips);
// Rounds a workspace size up to whole 4 KiB pages.
uint64_t round_up_to_page(uint64_t bytes);

}  // namespace simdev::gen::ops
