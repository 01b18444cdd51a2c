// The device's compute kernels, written for the simulator: plain C++ whose inner loops run
// over contiguous memory without cross-iteration float reductions, so the compiler can
// vectorise them without fast-math (results stay bit-reproducible across runs).
// Matrices are row-major; weight matrices are [out, in] (nn.Linear convention).
#pragma once

#include <cstddef>
#include <cstdint>

namespace simdev::kernels {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for each of rows rows of dim values; the
// mean of squares in double, in index order (calbin/MODEL.md, "Order of every reduction").
void rmsnorm(const float* x, const float* weight, float* out, size_t rows, size_t dim, double eps);

// Symmetric per-row int8 quantisation: scale[r] = max|x[r]| / 127, q = round(x / scale)
// clamped to [-127, 127]. A zero row gets scale 0 and zero values.
void quantize_rows(const float* x, size_t rows, size_t cols, int8_t* q, float* scales);

// The instruction sets the fast kernels are written for. Every one computes the reference
// loops' bits: the int8 kernels accumulate in int32, which has no rounding, and the FP32
// kernels add in the contract's lane order (kDotLanes below), so the choice changes speed,
// never a result.
enum class Isa : uint8_t {
  scalar,       // the reference loops
  avx2,         // int8 widened to int16 pairs; FP32 lanes in two 8-wide registers
  avx512_vnni,  // int8 through VPDPBUSD; FP32 lanes in one 16-wide register
};
// The fastest set this build and CPU run; `supported` says whether one of them runs here.
Isa best_isa();
bool supported(Isa isa);
const char* to_string(Isa isa);

// An int8 weight matrix as the device holds it: [rows][cols] values, one scale per row, and
// the sum of each row's values (int8_row_sums), which the VNNI kernel needs because its
// instruction multiplies unsigned by signed bytes: it adds 128 to every activation and takes
// 128 x row_sum back off, exactly.
struct Int8Weights {
  const int8_t* values = nullptr;
  const float* scales = nullptr;
  const int32_t* row_sums = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  // Rows [first, first + count): a slice a worker computes apart from the others.
  Int8Weights slice(size_t first, size_t count) const {
    return {values + first * cols, scales + first, row_sums + first, count, cols};
  }
};
void int8_row_sums(const int8_t* values, size_t rows, size_t cols, int32_t* sums);

// out[r * out_stride + o] = float(sum_i a[r][i] * w[o][i]) * a_scales[r] * w.scales[o], for
// rows activation rows of w.cols values: the sum in int32 (wrapping), then two FP32 products
// in that order. A decode row streams each weight row once; many rows are tiled so a block
// of weights stays in cache while the activation rows pass over it.
void int8_matmul(const int8_t* a, const float* a_scales, size_t rows, const Int8Weights& w,
                 float* out, size_t out_stride, Isa isa = best_isa());

// w4af16 (calbin/MODEL.md): x16 holds the activation rows already rounded to BF16; w holds
// int4 values one per byte, scales [out][in / group]. Per output, each group's exact products
// are summed in FP32 in index order and the output sums group_sum * scale in group order.
void w4af16_matmul(const float* x16, size_t rows, size_t in, const int8_t* w, const float* w_scales,
                   size_t group, size_t out_features, float* out);

// The contract's FP32 dot product (calbin/MODEL.md, "Order of every reduction"): kDotLanes
// partial sums, input i going to lane i mod kDotLanes in index order, each product rounded
// before it is added; then the lanes summed as a halving tree (lane j += lane j + width for
// width 8, 4, 2, 1). One AVX-512 register, two AVX2 or four SSE registers hold the lanes, so
// a SIMD kernel computes the same bits as this loop.
inline constexpr size_t kDotLanes = 16;
float dot_f32(const float* x, const float* w, size_t count);
// out[o] = dot_f32(x, w[o]) for one activation row, over FP32 weights or BF16 ones (widened
// exactly as they are read, so a BF16 table takes half the memory and bandwidth).
void f32_matvec(const float* x, size_t in, const float* w, size_t out_features, float* out,
                Isa isa = best_isa());
void bf16_matvec(const float* x, size_t in, const uint16_t* w, size_t out_features, float* out,
                 Isa isa = best_isa());

// RoPE's angles for one position: for i in [0, dim/2), the angle position * theta^(-2i/dim),
// its cosine and sine computed in double and rounded to FP32 (calbin/MODEL.md). They are the
// same for every head and layer, so a step computes them once per token.
void rope_table(int64_t position, size_t dim, double theta, float* cos_out, float* sin_out);
// NeoX rotary embedding of one head in place with rope_table's values: pairs (i, i + dim/2)
// rotate by angle i, in FP32.
void rope_neox(float* head, size_t dim, const float* cos, const float* sin);
// RoPE over adjacent pairs (2i, 2i+1), the GPT-J convention: not the model's (a mutant).
void rope_interleaved(float* head, size_t dim, const float* cos, const float* sin);
// rope_neox at one position, its table computed on the spot.
void rope_neox(float* head, size_t dim, int64_t position, double theta);

// out[i] = silu(gate[i]) * up[i].
void silu_mul(const float* gate, const float* up, float* out, size_t count);

// The most experts one token may be routed to (route_top_k's bound; model_dims checks it).
inline constexpr size_t kMaxActiveExperts = 64;

// MoE top-k routing of one token (calbin/MODEL.md, "Mixture of experts"): ids[j] are the k
// experts with the largest logits, largest first, the lower id first on a tie; weights[j]
// are their softmax probabilities over all experts (double), renormalised over the k when
// `normalise`.
void route_top_k(const float* logits, size_t experts, size_t k, bool normalise, uint32_t* ids,
                 float* weights);

// One query row against slots [0, slot_count) of one KV head.
//   k_transposed: [dim][stride] (dim-major, slot contiguous); v: [slot][dim].
// scores must hold slot_count floats (scratch). out[dim] = softmax(q.K / sqrt(dim)) V in
// calbin/MODEL.md's order: each score summed over dimensions in index order, scaled by
// float(1 / sqrt(dim)); e = exp(score - max) in FP32, summed in double in slot order;
// p = e * float(1 / sum); out[d] summed over slots in slot order.
void attend(const float* q, const float* k_transposed, size_t stride, const float* v,
            size_t slot_count, size_t dim, float* scores, float* out);

}  // namespace simdev::kernels
