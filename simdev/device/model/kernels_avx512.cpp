// AVX-512 kernels (F, BW, VL, DQ and VNNI), compiled with those flags in this translation unit
// alone and called only on a CPU that has them (kernels::supported). Nothing here
// instantiates a standard-library template: an inline function compiled with AVX-512 here
// could be the copy the linker keeps for every other file too.
#include <immintrin.h>

#include "simdev/device/model/kernels_isa.hpp"

namespace simdev::kernels::avx512 {
namespace {

// The activation rows with 128 added to every byte (a XOR 0x80): VPDPBUSD multiplies an
// unsigned byte by a signed one. Per thread, reused from call to call.
class OffsetRows {
 public:
  OffsetRows() = default;
  OffsetRows(const OffsetRows&) = delete;
  OffsetRows& operator=(const OffsetRows&) = delete;
  ~OffsetRows() { delete[] data_; }

  const uint8_t* fill(const int8_t* a, size_t count) {
    if (count > capacity_) {
      delete[] data_;
      data_ = new uint8_t[count];
      capacity_ = count;
    }
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    size_t i = 0;
    for (; i + 64 <= count; i += 64) {
      _mm512_storeu_si512(data_ + i, _mm512_xor_si512(_mm512_loadu_si512(a + i), flip));
    }
    for (; i < count; ++i) data_[i] = static_cast<uint8_t>(a[i] ^ 0x80);
    return data_;
  }

 private:
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

OffsetRows& offset_rows() {
  thread_local OffsetRows rows;
  return rows;
}

// The sums of four accumulators' lanes, in one register: [sum a, sum b, sum c, sum d].
__m128i reduce4(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
  const __m512i abcd =
      _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
  const __m256i half =
      _mm256_add_epi32(_mm512_castsi512_si256(abcd), _mm512_extracti64x4_epi64(abcd, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
}

// R activation rows against O weight rows (O a multiple of 4): sums[r][o] = the dot product
// of offset row r with weight row o, over cols bytes.
template <int R, int O>
void int8_tile(const uint8_t* const* a, const int8_t* const* w, size_t cols,
               int32_t (&sums)[R][O]) {
  __m512i acc[R][O];
  for (int r = 0; r < R; ++r) {
    for (int o = 0; o < O; ++o) acc[r][o] = _mm512_setzero_si512();
  }
  size_t k = 0;
  for (; k + 64 <= cols; k += 64) {
    __m512i wv[O];
    for (int o = 0; o < O; ++o) wv[o] = _mm512_loadu_si512(w[o] + k);
    for (int r = 0; r < R; ++r) {
      const __m512i av = _mm512_loadu_si512(a[r] + k);
      for (int o = 0; o < O; ++o) acc[r][o] = _mm512_dpbusd_epi32(acc[r][o], av, wv[o]);
    }
  }
  if (k < cols) {
    // Bytes past the row load as zero on both sides and add nothing.
    const __mmask64 mask = (1ull << (cols - k)) - 1;  // cols - k < 64
    __m512i wv[O];
    for (int o = 0; o < O; ++o) wv[o] = _mm512_maskz_loadu_epi8(mask, w[o] + k);
    for (int r = 0; r < R; ++r) {
      const __m512i av = _mm512_maskz_loadu_epi8(mask, a[r] + k);
      for (int o = 0; o < O; ++o) acc[r][o] = _mm512_dpbusd_epi32(acc[r][o], av, wv[o]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int o = 0; o < O; o += 4) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(&sums[r][o]),
                       reduce4(acc[r][o], acc[r][o + 1], acc[r][o + 2], acc[r][o + 3]));
    }
  }
}

// The R x O block of the product at rows [r0, r0 + R) and weight rows [o0, o0 + O). Where
// fewer than O weight rows remain, the last one is repeated and its sums are not stored.
template <int R, int O>
void int8_block(const uint8_t* a, const float* a_scales, size_t r0, const Int8Weights& w, size_t o0,
                float* out, size_t out_stride) {
  const uint8_t* a_rows[R];
  for (int r = 0; r < R; ++r) a_rows[r] = a + (r0 + static_cast<size_t>(r)) * w.cols;
  const int8_t* w_rows[O];
  for (int o = 0; o < O; ++o) {
    const size_t row =
        o0 + static_cast<size_t>(o) < w.rows ? o0 + static_cast<size_t>(o) : w.rows - 1;
    w_rows[o] = w.values + row * w.cols;
  }
  int32_t sums[R][O];
  int8_tile<R, O>(a_rows, w_rows, w.cols, sums);
  for (int r = 0; r < R; ++r) {
    const size_t row = r0 + static_cast<size_t>(r);
    float* dst = out + row * out_stride;
    for (int o = 0; o < O && o0 + static_cast<size_t>(o) < w.rows; ++o) {
      const size_t col = o0 + static_cast<size_t>(o);
      // Unsigned arithmetic: the int32 sum wraps as the reference's does, without UB.
      const auto sum = static_cast<int32_t>(static_cast<uint32_t>(sums[r][o]) -
                                            128u * static_cast<uint32_t>(w.row_sums[col]));
      dst[col] = static_cast<float>(sum) * a_scales[row] * w.scales[col];
    }
  }
}

// One activation row against every weight row, one weight row after the other, so the weights
// stream from memory in address order (interleaving several rows defeats the hardware
// prefetcher: 9 against 18 GB/s here). Four accumulators per row hide VPDPBUSD's latency;
// integer sums may be split any way.
void int8_gemv(const uint8_t* a, const float* a_scale, const Int8Weights& w, float* out) {
  const size_t cols = w.cols;
  for (size_t o = 0; o < w.rows; ++o) {
    const int8_t* row = w.values + o * cols;
    __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                      _mm512_setzero_si512()};
    size_t k = 0;
    for (; k + 256 <= cols; k += 256) {
      for (int u = 0; u < 4; ++u) {
        acc[u] = _mm512_dpbusd_epi32(acc[u], _mm512_loadu_si512(a + k + 64 * u),
                                     _mm512_loadu_si512(row + k + 64 * u));
      }
    }
    for (; k < cols; k += 64) {
      const __mmask64 mask = cols - k >= 64 ? ~0ull : (1ull << (cols - k)) - 1;
      acc[0] = _mm512_dpbusd_epi32(acc[0], _mm512_maskz_loadu_epi8(mask, a + k),
                                   _mm512_maskz_loadu_epi8(mask, row + k));
    }
    const __m512i total =
        _mm512_add_epi32(_mm512_add_epi32(acc[0], acc[1]), _mm512_add_epi32(acc[2], acc[3]));
    const auto sum = static_cast<int32_t>(static_cast<uint32_t>(_mm512_reduce_add_epi32(total)) -
                                          128u * static_cast<uint32_t>(w.row_sums[o]));
    out[o] = static_cast<float>(sum) * a_scale[0] * w.scales[o];
  }
}

// The contract's halving tree over 16 lanes (kernels.hpp, kDotLanes): lane j += lane j + 8,
// then + 4, + 2, + 1, each addition with lane j on the left as the reference loop has it.
float lane_tree(__m512 lanes) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(lanes), _mm512_extractf32x8_ps(lanes, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

__m512 load_weights(const float* w, __mmask16 mask) { return _mm512_maskz_loadu_ps(mask, w); }
__m512 load_weights(const uint16_t* w, __mmask16 mask) {
  const __m512i bits = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, w));
  return _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16));
}

// kRows outputs per pass; the last pass repeats the final row where fewer remain.
template <class W, int kRows = 1>
void matvec_rows(const float* x, size_t in, const W* w, size_t out_features, float* out) {
  const __mmask16 all = 0xffff;
  for (size_t o0 = 0; o0 < out_features; o0 += kRows) {
    const W* rows[kRows];
    for (int j = 0; j < kRows; ++j) {
      const size_t row = o0 + static_cast<size_t>(j) < out_features ? o0 + static_cast<size_t>(j)
                                                                    : out_features - 1;
      rows[j] = w + row * in;
    }
    __m512 lanes[kRows];
    for (auto& l : lanes) l = _mm512_setzero_ps();
    size_t k = 0;
    for (; k + 16 <= in; k += 16) {
      const __m512 xv = _mm512_loadu_ps(x + k);
      for (int j = 0; j < kRows; ++j) {
        lanes[j] = _mm512_add_ps(lanes[j], _mm512_mul_ps(xv, load_weights(rows[j] + k, all)));
      }
    }
    if (k < in) {
      // Only the lanes the tail reaches take an addition: adding +0 to a lane holding -0
      // would change its sign.
      const auto mask = static_cast<__mmask16>((1u << (in - k)) - 1u);
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + k);
      for (int j = 0; j < kRows; ++j) {
        lanes[j] = _mm512_mask_add_ps(lanes[j], mask, lanes[j],
                                      _mm512_mul_ps(xv, load_weights(rows[j] + k, mask)));
      }
    }
    for (int j = 0; j < kRows && o0 + static_cast<size_t>(j) < out_features; ++j) {
      out[o0 + static_cast<size_t>(j)] = lane_tree(lanes[j]);
    }
  }
}

}  // namespace

void int8_matmul(const int8_t* a, const float* a_scales, size_t rows, const Int8Weights& w,
                 float* out, size_t out_stride) {
  if (rows == 0 || w.rows == 0) return;
  const uint8_t* offset = offset_rows().fill(a, rows * w.cols);
  // Eight weight rows at a time against every block of four activation rows: the block of
  // weights stays in the first-level cache while the activation rows pass over it. The rows
  // left over (all of a decode step's one) stream the weights once each.
  for (size_t o0 = 0; rows >= 4 && o0 < w.rows; o0 += 8) {
    for (size_t r = 0; r + 4 <= rows; r += 4) {
      int8_block<4, 4>(offset, a_scales, r, w, o0, out, out_stride);
      if (o0 + 4 < w.rows) int8_block<4, 4>(offset, a_scales, r, w, o0 + 4, out, out_stride);
    }
  }
  for (size_t r = rows - rows % 4; r < rows; ++r) {
    int8_gemv(offset + r * w.cols, a_scales + r, w, out + r * out_stride);
  }
}

void matvec(const float* x, size_t in, const float* w, size_t out_features, float* out) {
  matvec_rows(x, in, w, out_features, out);
}

void matvec(const float* x, size_t in, const uint16_t* w, size_t out_features, float* out) {
  matvec_rows(x, in, w, out_features, out);
}

}  // namespace simdev::kernels::avx512
