#include "simdev/device/model/kernels.hpp"

#include "simdev/device/model/kernels_isa.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "calbin/bf16.hpp"

namespace simdev::kernels {

// Loops whose lanes are independent (no reduction the compiler would have to reorder) get a
// copy per instruction set, picked once at load: wider registers, the same operations on each
// element, so the same bits. No FMA contraction either way (-ffp-contract=off). Clang 14 drops
// the attribute from a function declared before without it, so it goes on internal helpers.
// ThreadSanitizer's runtime is not up when an ifunc resolver runs at load: no clones there.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIMDEV_NO_CLONES 1
#endif
#endif
#if defined(CALRT_KERNELS_X86) && defined(__clang__) && !defined(SIMDEV_NO_CLONES)
#define SIMDEV_WIDE_LOOPS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SIMDEV_WIDE_LOOPS
#endif

void rmsnorm(const float* x, const float* weight, float* out, size_t rows, size_t dim, double eps) {
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x + r * dim;
    double sum_squares = 0.0;
    for (size_t i = 0; i < dim; ++i) {
      sum_squares += static_cast<double>(row[i]) * row[i];
    }
    const float inv =
        static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(dim) + eps));
    float* dst = out + r * dim;
    for (size_t i = 0; i < dim; ++i) {
      dst[i] = row[i] * inv * weight[i];
    }
  }
}

namespace {

SIMDEV_WIDE_LOOPS
void quantize_loops(const float* x, size_t rows, size_t cols, int8_t* q, float* scales) {
  for (size_t r = 0; r < rows; ++r) {
    const float* row = x + r * cols;
    float max_abs = 0.0f;
    for (size_t i = 0; i < cols; ++i) {
      max_abs = std::max(max_abs, std::fabs(row[i]));
    }
    const float scale = max_abs / 127.0f;
    scales[r] = scale;
    const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    int8_t* dst = q + r * cols;
    for (size_t i = 0; i < cols; ++i) {
      const float v = std::nearbyint(row[i] * inv);
      dst[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
    }
  }
}

}  // namespace

void quantize_rows(const float* x, size_t rows, size_t cols, int8_t* q, float* scales) {
  quantize_loops(x, rows, cols, q, scales);
}

namespace {

int32_t dot_i8(const int8_t* a, const int8_t* b, size_t n) {
  int32_t acc = 0;  // integer addition is associative: the compiler may vectorise this
  for (size_t i = 0; i < n; ++i) {
    acc += static_cast<int32_t>(a[i]) * static_cast<int32_t>(b[i]);
  }
  return acc;
}

}  // namespace

bool supported(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return true;
#if defined(CALRT_KERNELS_X86)
    case Isa::avx2: {
      static const bool avx2 = __builtin_cpu_supports("avx2");
      return avx2;
    }
    case Isa::avx512_vnni: {
      static const bool vnni =
          __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
          __builtin_cpu_supports("avx512vnni");
      return vnni;
    }
#else
    case Isa::avx2:
    case Isa::avx512_vnni:
      return false;
#endif
  }
  return false;
}

Isa best_isa() {
  static const Isa best = supported(Isa::avx512_vnni) ? Isa::avx512_vnni
                          : supported(Isa::avx2)      ? Isa::avx2
                                                      : Isa::scalar;
  return best;
}

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512_vnni:
      return "avx512_vnni";
  }
  return "?";
}

void int8_row_sums(const int8_t* values, size_t rows, size_t cols, int32_t* sums) {
  for (size_t r = 0; r < rows; ++r) {
    int32_t sum = 0;
    for (size_t i = 0; i < cols; ++i) sum += values[r * cols + i];
    sums[r] = sum;
  }
}

namespace {

void int8_matmul_reference(const int8_t* a, const float* a_scales, size_t rows,
                           const Int8Weights& w, float* out, size_t out_stride) {
  for (size_t r = 0; r < rows; ++r) {
    const int8_t* a_row = a + r * w.cols;
    float* dst = out + r * out_stride;
    for (size_t o = 0; o < w.rows; ++o) {
      const int32_t acc = dot_i8(a_row, w.values + o * w.cols, w.cols);
      dst[o] = static_cast<float>(acc) * a_scales[r] * w.scales[o];
    }
  }
}

template <class W>
float widened(W value) {
  if constexpr (sizeof(W) == 2) {
    return calbin::bf16_to_f32(value);
  } else {
    return value;
  }
}

// The contract's dot product over FP32 or BF16 weights (kernels.hpp, kDotLanes). The lanes
// are independent sums, so the compiler may vectorise the block loop without reassociating.
template <class W>
float lane_dot(const float* x, const W* w, size_t count) {
  float lanes[kDotLanes] = {};
  size_t i = 0;
  for (; i + kDotLanes <= count; i += kDotLanes) {
    for (size_t j = 0; j < kDotLanes; ++j) {
      lanes[j] += x[i + j] * widened(w[i + j]);
    }
  }
  for (size_t j = 0; i + j < count; ++j) {
    lanes[j] += x[i + j] * widened(w[i + j]);
  }
  for (size_t width = kDotLanes / 2; width > 0; width /= 2) {
    for (size_t j = 0; j < width; ++j) {
      lanes[j] += lanes[j + width];
    }
  }
  return lanes[0];
}

}  // namespace

void int8_matmul(const int8_t* a, const float* a_scales, size_t rows, const Int8Weights& w,
                 float* out, size_t out_stride, Isa isa) {
  switch (isa) {
#if defined(CALRT_KERNELS_X86)
    case Isa::avx512_vnni:
      return avx512::int8_matmul(a, a_scales, rows, w, out, out_stride);
    case Isa::avx2:
      return avx2::int8_matmul(a, a_scales, rows, w, out, out_stride);
#endif
    default:
      return int8_matmul_reference(a, a_scales, rows, w, out, out_stride);
  }
}

void w4af16_matmul(const float* x16, size_t rows, size_t in, const int8_t* w, const float* w_scales,
                   size_t group, size_t out_features, float* out) {
  const size_t groups = in / group;
  for (size_t r = 0; r < rows; ++r) {
    const float* x = x16 + r * in;
    for (size_t o = 0; o < out_features; ++o) {
      const int8_t* row = w + o * in;
      float acc = 0.0f;
      for (size_t g = 0; g < groups; ++g) {
        float group_sum = 0.0f;
        for (size_t i = g * group; i < (g + 1) * group; ++i) {
          group_sum += static_cast<float>(row[i]) * x[i];
        }
        acc += group_sum * w_scales[o * groups + g];
      }
      out[r * out_features + o] = acc;
    }
  }
}

float dot_f32(const float* x, const float* w, size_t count) { return lane_dot(x, w, count); }

namespace {

// One dispatch for the FP32 and the BF16 weights: the per-set kernels are overloads.
template <class W>
void matvec_on(Isa isa, const float* x, size_t in, const W* w, size_t out_features, float* out) {
  switch (isa) {
#if defined(CALRT_KERNELS_X86)
    case Isa::avx512_vnni:
      return avx512::matvec(x, in, w, out_features, out);
    case Isa::avx2:
      return avx2::matvec(x, in, w, out_features, out);
#endif
    default:
      for (size_t o = 0; o < out_features; ++o) out[o] = lane_dot(x, w + o * in, in);
  }
}

}  // namespace

void f32_matvec(const float* x, size_t in, const float* w, size_t out_features, float* out,
                Isa isa) {
  matvec_on(isa, x, in, w, out_features, out);
}

void bf16_matvec(const float* x, size_t in, const uint16_t* w, size_t out_features, float* out,
                 Isa isa) {
  matvec_on(isa, x, in, w, out_features, out);
}

void rope_table(int64_t position, size_t dim, double theta, float* cos_out, float* sin_out) {
  for (size_t i = 0; i < dim / 2; ++i) {
    const double inv_freq =
        std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
    const double angle = static_cast<double>(position) * inv_freq;
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(std::sin(angle));
  }
}

void rope_neox(float* head, size_t dim, const float* cos, const float* sin) {
  const size_t half = dim / 2;
  for (size_t i = 0; i < half; ++i) {
    const float x0 = head[i];
    const float x1 = head[i + half];
    head[i] = x0 * cos[i] - x1 * sin[i];
    head[i + half] = x0 * sin[i] + x1 * cos[i];
  }
}

void rope_interleaved(float* head, size_t dim, const float* cos, const float* sin) {
  for (size_t i = 0; i < dim / 2; ++i) {
    const float x0 = head[2 * i];
    const float x1 = head[2 * i + 1];
    head[2 * i] = x0 * cos[i] - x1 * sin[i];
    head[2 * i + 1] = x0 * sin[i] + x1 * cos[i];
  }
}

void rope_neox(float* head, size_t dim, int64_t position, double theta) {
  std::vector<float> cos(dim / 2), sin(dim / 2);
  rope_table(position, dim, theta, cos.data(), sin.data());
  rope_neox(head, dim, cos.data(), sin.data());
}

void silu_mul(const float* gate, const float* up, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  }
}

void route_top_k(const float* logits, size_t experts, size_t k, bool normalise, uint32_t* ids,
                 float* weights) {
  // k passes of a selection: k is a handful, and a strict > keeps the lower id on a tie.
  for (size_t j = 0; j < k; ++j) {
    size_t best = experts;
    for (size_t e = 0; e < experts; ++e) {
      bool taken = false;
      for (size_t i = 0; i < j; ++i) taken = taken || ids[i] == e;
      if (!taken && (best == experts || logits[e] > logits[best])) best = e;
    }
    ids[j] = static_cast<uint32_t>(best);
  }
  const double top = logits[ids[0]];
  double all = 0.0;
  for (size_t e = 0; e < experts; ++e) all += std::exp(static_cast<double>(logits[e]) - top);
  double probabilities[kMaxActiveExperts];
  double picked = 0.0;
  for (size_t j = 0; j < k; ++j) {
    probabilities[j] = std::exp(static_cast<double>(logits[ids[j]]) - top) / all;
    picked += probabilities[j];
  }
  for (size_t j = 0; j < k; ++j) {
    weights[j] = static_cast<float>(normalise ? probabilities[j] / picked : probabilities[j]);
  }
}

namespace {

SIMDEV_WIDE_LOOPS
void attend_loops(const float* q, const float* k_transposed, size_t stride, const float* v,
                  size_t slot_count, size_t dim, float* scores, float* out) {
  // Scores accumulate dimension by dimension, so the slot loop is contiguous. Four dimensions
  // are folded per pass over the slots with the additions in the same order as one at a time:
  // the result is bit-identical, with a quarter of the loads and stores of `scores`.
  std::fill(scores, scores + slot_count, 0.0f);
  size_t d = 0;
  for (; d + 4 <= dim; d += 4) {
    const float q0 = q[d], q1 = q[d + 1], q2 = q[d + 2], q3 = q[d + 3];
    const float* k0 = k_transposed + d * stride;
    const float* k1 = k0 + stride;
    const float* k2 = k1 + stride;
    const float* k3 = k2 + stride;
    for (size_t s = 0; s < slot_count; ++s) {
      scores[s] = (((scores[s] + q0 * k0[s]) + q1 * k1[s]) + q2 * k2[s]) + q3 * k3[s];
    }
  }
  for (; d < dim; ++d) {
    const float qd = q[d];
    const float* k_row = k_transposed + d * stride;
    for (size_t s = 0; s < slot_count; ++s) {
      scores[s] += qd * k_row[s];
    }
  }
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(dim)));
  float max_score = -INFINITY;
  for (size_t s = 0; s < slot_count; ++s) {
    scores[s] *= scale;
    max_score = std::max(max_score, scores[s]);
  }
  double sum = 0.0;
  for (size_t s = 0; s < slot_count; ++s) {
    scores[s] = std::exp(scores[s] - max_score);
    sum += scores[s];
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  // The same folding over slots: out[d] takes its additions in slot order either way.
  std::fill(out, out + dim, 0.0f);
  size_t s = 0;
  for (; s + 4 <= slot_count; s += 4) {
    const float p0 = scores[s] * inv_sum, p1 = scores[s + 1] * inv_sum;
    const float p2 = scores[s + 2] * inv_sum, p3 = scores[s + 3] * inv_sum;
    const float* v0 = v + s * dim;
    const float* v1 = v0 + dim;
    const float* v2 = v1 + dim;
    const float* v3 = v2 + dim;
    for (size_t e = 0; e < dim; ++e) {
      out[e] = (((out[e] + p0 * v0[e]) + p1 * v1[e]) + p2 * v2[e]) + p3 * v3[e];
    }
  }
  for (; s < slot_count; ++s) {
    const float p = scores[s] * inv_sum;
    const float* v_row = v + s * dim;
    for (size_t e = 0; e < dim; ++e) {
      out[e] += p * v_row[e];
    }
  }
}

}  // namespace

void attend(const float* q, const float* k_transposed, size_t stride, const float* v,
            size_t slot_count, size_t dim, float* scores, float* out) {
  attend_loops(q, k_transposed, stride, v, slot_count, dim, scores, out);
}

}  // namespace simdev::kernels
