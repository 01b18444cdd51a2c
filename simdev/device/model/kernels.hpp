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

// out[r][o] = (sum_i a[r][i] * w[o][i]) * a_scale[r] * w_scale[o], int32 accumulation. Many
// rows go through Eigen's GEMM where the CPU allows (kernels_eigen.hpp), with the same result
// bit for bit; the reference loops are int8_matmul_reference.
void int8_matmul(const int8_t* a, const float* a_scales, size_t rows, size_t in, const int8_t* w,
                 const float* w_scales, size_t out_features, float* out);
void int8_matmul_reference(const int8_t* a, const float* a_scales, size_t rows, size_t in,
                           const int8_t* w, const float* w_scales, size_t out_features, float* out);
// Whether this build has the Eigen kernel and this CPU runs it (AVX2 and FMA).
bool eigen_available();
// Rows from which int8_matmul takes the Eigen kernel (benchmarks/README.md has the figures).
inline constexpr size_t kEigenMinRows = 8;

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
// out[o] = dot_f32(x, w[o]) (one activation row).
void f32_matvec(const float* x, size_t in, const float* w, size_t out_features, float* out);

// NeoX rotary embedding of one head in place: pairs (i, i + dim/2) rotate by
// position * theta^(-2i/dim). The angle, its cosine and sine are computed in double and
// rounded to FP32; the rotation itself is FP32 (calbin/MODEL.md).
void rope_neox(float* head, size_t dim, int64_t position, double theta);
// RoPE over adjacent pairs (2i, 2i+1), the GPT-J convention: not the model's (a mutant).
void rope_interleaved(float* head, size_t dim, int64_t position, double theta);

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
