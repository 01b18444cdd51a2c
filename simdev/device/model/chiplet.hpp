// One chiplet's share of a step: it holds only its weight shard and its half of the KV heads
// and produces partial sums that the D2D all-reduce (in the executor) adds up.
#pragma once

#include <cstdint>
#include <vector>

#include "simdev/device/base/numerics_mutant.hpp"
#include "simdev/device/base/workers.hpp"
#include "simdev/device/model/chip_weights.hpp"
#include "simdev/device/model/kv_store.hpp"
#include "simdev/device/model/model_dims.hpp"

namespace simdev {

struct StepRows {
  const float* x = nullptr;            // [rows][hidden] residual stream, same on every chip
  size_t rows = 0;                     // tokens in this submission
  const int32_t* positions = nullptr;  // [rows], RoPE only
  size_t past = 0;                     // P: row r is KV slot P + r
  // Each row's RoPE cosines and sines, [rows][head_dim / 2] (kernels::rope_table): the same
  // for every head, layer and chip, so the step computes them once.
  const float* rope_cos = nullptr;
  const float* rope_sin = nullptr;
};

// A chip's working memory for one step. It outlives the step (the calbin image keeps one per
// chip) so that a decode step does not allocate and zero-fill megabytes of staged KV again:
// that was a fifth of a long prompt's host time.
struct ChipScratch {
  std::vector<float> normed, q, k, v, attn, gate, up;
  std::vector<std::vector<float>> scores;  // one per worker: attend()'s [slot] scratch
  std::vector<int8_t> quantized;
  std::vector<float> act_scales;
  std::vector<float> act16;               // w4af16: the BF16-rounded activation rows
  std::vector<float> k_staged, v_staged;  // FP32 copies: [head][dim][slot], [head][slot][dim]
  // MoE: router logits [row][expert], each row's experts and weights [row][k], and one
  // expert's rows gathered together (inputs [n][H], outputs [n][H]) for its grouped GEMM.
  std::vector<float> router_logits, route_weights, expert_in, expert_out;
  std::vector<uint32_t> route_ids, expert_rows;
  std::vector<float> expert_row_weights;
};

class Chiplet {
 public:
  // `workers` split the chip's matmuls and attention heads when the chip's own piece of the
  // step runs alone (a one-chip model); inside a piece they run inline.
  Chiplet(const ModelDims& dims, const ChipWeights& weights, ChipKv& kv, ChipScratch& scratch,
          Workers& workers, NumericsMutant mutant = NumericsMutant::none);

  // Projects q/k/v for every row, stores k/v at slots P + r, then attends for rows
  // [first_active, rows) and writes their partial o_proj output: [rows - first_active][H].
  void attention(size_t layer, const StepRows& step, size_t first_active, float* partial);
  // Partial MLP output of rows rows of x: [rows][H].
  void mlp(size_t layer, const float* x, size_t rows, float* partial);
  // Logits of this chip's vocabulary rows for one residual row: [vocab_local].
  void logits(const float* x, float* out);

 private:
  void project(const Int8Matrix& w, const float* in, size_t rows, size_t in_dim, float* out);
  // The chip's partial down_proj output of one MLP (dense, or one expert) on rows of the
  // normed input: [rows][H].
  void swiglu(const MlpWeights& w, const float* normed, size_t rows, float* partial);
  // Routes each row, runs each expert on the rows routed to it, and adds the weighted
  // outputs into partial ([rows][H], zeroed first) in ascending expert order.
  void moe(const LayerWeights& w, size_t rows, float* partial);
  void store_kv(size_t layer, const StepRows& step);
  void stage_kv(size_t layer, size_t slot_count);
  double eps() const {
    return mutant_ == NumericsMutant::rms_eps ? dims_.rms_eps * 1e4 : dims_.rms_eps;
  }
  // q and k after their head norm and RoPE; `row` picks the step's RoPE angles.
  void norm_and_rope(float* head, const std::vector<float>& norm, bool ignore_norm,
                     const StepRows& step, size_t row);
  // Runs piece(first, size) over [0, count), split among the workers in blocks of `align`
  // when the caller says the work is `worth_it` (a hand-off costs some microseconds).
  void split(size_t count, size_t align, bool worth_it,
             const std::function<void(size_t, size_t)>& piece);

  const ModelDims& dims_;
  const ChipWeights& weights_;
  ChipKv& kv_;
  Workers& workers_;
  NumericsMutant mutant_;
  std::vector<float> ones_;  // a norm weight of 1, for the *_norm_ignored mutants
  ChipScratch& s_;
};

}  // namespace simdev
