// AVX2 kernels, compiled with -mavx2 in this translation unit alone and called only on a CPU
// that has it (kernels::supported). No FMA: the contract rounds every product before it is
// added. Nothing here instantiates a standard-library template (kernels_avx512.cpp says why).
#include <immintrin.h>

#include "simdev/device/model/kernels_isa.hpp"

namespace simdev::kernels::avx2 {
namespace {

// Sixteen int8 values widened to int16: VPMADDWD then multiplies pairs exactly into int32.
// (VPMADDUBSW would saturate at 2 x 127 x 128.)
__m256i widen(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// [sum a, sum b, sum c, sum d] of four accumulators' lanes.
__m128i reduce4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

// The R x O block of the product at rows [r0, r0 + R) and weight rows [o0, o0 + O); O is a
// multiple of 4. Where fewer than O weight rows remain, the last is repeated, not stored.
template <int R, int O>
void int8_block(const int8_t* a, const float* a_scales, size_t r0, const Int8Weights& w, size_t o0,
                float* out, size_t out_stride) {
  const size_t cols = w.cols;
  const int8_t* a_rows[R];
  for (int r = 0; r < R; ++r) a_rows[r] = a + (r0 + static_cast<size_t>(r)) * cols;
  const int8_t* w_rows[O];
  for (int o = 0; o < O; ++o) {
    const size_t row =
        o0 + static_cast<size_t>(o) < w.rows ? o0 + static_cast<size_t>(o) : w.rows - 1;
    w_rows[o] = w.values + row * cols;
  }
  __m256i acc[R][O];
  for (int r = 0; r < R; ++r) {
    for (int o = 0; o < O; ++o) acc[r][o] = _mm256_setzero_si256();
  }
  size_t k = 0;
  for (; k + 16 <= cols; k += 16) {
    __m256i wv[O];
    for (int o = 0; o < O; ++o) wv[o] = widen(w_rows[o] + k);
    for (int r = 0; r < R; ++r) {
      const __m256i av = widen(a_rows[r] + k);
      for (int o = 0; o < O; ++o) {
        acc[r][o] = _mm256_add_epi32(acc[r][o], _mm256_madd_epi16(av, wv[o]));
      }
    }
  }
  int32_t sums[R][O];
  for (int r = 0; r < R; ++r) {
    for (int o = 0; o < O; o += 4) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(&sums[r][o]),
                       reduce4(acc[r][o], acc[r][o + 1], acc[r][o + 2], acc[r][o + 3]));
    }
    for (int o = 0; o < O; ++o) {
      // Unsigned arithmetic: the int32 sum wraps as the reference's does, without UB.
      auto sum = static_cast<uint32_t>(sums[r][o]);
      for (size_t i = k; i < cols; ++i) {
        sum += static_cast<uint32_t>(int32_t{a_rows[r][i]} * int32_t{w_rows[o][i]});
      }
      sums[r][o] = static_cast<int32_t>(sum);
    }
  }
  for (int r = 0; r < R; ++r) {
    const size_t row = r0 + static_cast<size_t>(r);
    float* dst = out + row * out_stride;
    for (int o = 0; o < O && o0 + static_cast<size_t>(o) < w.rows; ++o) {
      const size_t col = o0 + static_cast<size_t>(o);
      dst[col] = static_cast<float>(sums[r][o]) * a_scales[row] * w.scales[col];
    }
  }
}

// One activation row against every weight row, one weight row after the other, so the weights
// stream in address order (kernels_avx512.cpp says why); two accumulators hide the latency.
void int8_gemv(const int8_t* a, const float* a_scale, const Int8Weights& w, float* out) {
  const size_t cols = w.cols;
  for (size_t o = 0; o < w.rows; ++o) {
    const int8_t* row = w.values + o * cols;
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
    size_t k = 0;
    for (; k + 32 <= cols; k += 32) {
      acc0 = _mm256_add_epi32(acc0, _mm256_madd_epi16(widen(a + k), widen(row + k)));
      acc1 = _mm256_add_epi32(acc1, _mm256_madd_epi16(widen(a + k + 16), widen(row + k + 16)));
    }
    const __m128i sums = reduce4(acc0, acc1, _mm256_setzero_si256(), _mm256_setzero_si256());
    auto sum = static_cast<uint32_t>(_mm_extract_epi32(sums, 0)) +
               static_cast<uint32_t>(_mm_extract_epi32(sums, 1));
    for (; k < cols; ++k) sum += static_cast<uint32_t>(int32_t{a[k]} * int32_t{row[k]});
    out[o] = static_cast<float>(static_cast<int32_t>(sum)) * a_scale[0] * w.scales[o];
  }
}

// The contract's halving tree over 16 lanes held as lanes 0-7 and 8-15 (kernels.hpp).
float lane_tree(__m256 low, __m256 high) {
  const __m256 s8 = _mm256_add_ps(low, high);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

__m256 load8(const float* w) { return _mm256_loadu_ps(w); }
__m256 load8(const uint16_t* w) {
  const __m256i bits = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(bits, 16));
}

// Lane j of the tail takes x[j] * w[j] for j < count, read one by one; other lanes are left
// as they are (adding +0 to a lane holding -0 would change its sign).
template <class W>
void add_tail(__m256& low, __m256& high, const float* x, const W* w, size_t count) {
  alignas(32) float lanes[16];
  _mm256_store_ps(lanes, low);
  _mm256_store_ps(lanes + 8, high);
  for (size_t j = 0; j < count; ++j) {
    float weight;
    if constexpr (sizeof(W) == 2) {
      const uint32_t bits = static_cast<uint32_t>(w[j]) << 16;
      __builtin_memcpy(&weight, &bits, sizeof weight);
    } else {
      weight = w[j];
    }
    lanes[j] += x[j] * weight;
  }
  low = _mm256_load_ps(lanes);
  high = _mm256_load_ps(lanes + 8);
}

template <class W>
void matvec_rows(const float* x, size_t in, const W* w, size_t out_features, float* out) {
  for (size_t o = 0; o < out_features; ++o) {
    const W* row = w + o * in;
    __m256 low = _mm256_setzero_ps(), high = _mm256_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= in; k += 16) {
      low = _mm256_add_ps(low, _mm256_mul_ps(_mm256_loadu_ps(x + k), load8(row + k)));
      high = _mm256_add_ps(high, _mm256_mul_ps(_mm256_loadu_ps(x + k + 8), load8(row + k + 8)));
    }
    if (k < in) add_tail(low, high, x + k, row + k, in - k);
    out[o] = lane_tree(low, high);
  }
}

}  // namespace

void int8_matmul(const int8_t* a, const float* a_scales, size_t rows, const Int8Weights& w,
                 float* out, size_t out_stride) {
  // Four weight rows at a time against every pair of activation rows; a row left over streams
  // the weights once (kernels_avx512.cpp says why).
  for (size_t o0 = 0; rows >= 2 && o0 < w.rows; o0 += 4) {
    for (size_t r = 0; r + 2 <= rows; r += 2) {
      int8_block<2, 4>(a, a_scales, r, w, o0, out, out_stride);
    }
  }
  if (rows % 2 == 1) {
    int8_gemv(a + (rows - 1) * w.cols, a_scales + rows - 1, w, out + (rows - 1) * out_stride);
  }
}

void matvec(const float* x, size_t in, const float* w, size_t out_features, float* out) {
  matvec_rows(x, in, w, out_features, out);
}

void matvec(const float* x, size_t in, const uint16_t* w, size_t out_features, float* out) {
  matvec_rows(x, in, w, out_features, out);
}

}  // namespace simdev::kernels::avx2
