#include "runner/core/tensor_io.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

#include "calbin/bf16.hpp"
#include "calbin/layout.hpp"
#include "runner/core/metrics.hpp"

namespace runner {
namespace {

std::runtime_error desc_error(const calrt::TensorDesc& desc, const std::string& what) {
  return std::runtime_error("tensor " + desc.name + ": " + what);
}

// BF16 -> FP32 of 16 elements. Fixed length and __restrict let GCC vectorise this at -O2,
// whose cheap cost model gives up on loops of unknown length or with possible overlap.
inline void widen_bf16_16(const std::byte* __restrict src, float* __restrict dst) {
  for (size_t i = 0; i < 16; ++i) {
    uint16_t bits = 0;
    std::memcpy(&bits, src + 2 * i, sizeof(bits));  // the mapping need not be aligned
    dst[i] = calbin::bf16_to_f32(bits);
  }
}

// ThreadSanitizer instruments the clones' resolver, which the dynamic loader runs before the
// TSan runtime has started: every binary linking this file would crash before main.
#if defined(__SANITIZE_THREAD__)
#define CALRT_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CALRT_TSAN_BUILD 1
#endif
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(CALRT_TSAN_BUILD)
// Baseline x86-64 has 16-byte SSE2 only; an AVX2 clone, picked at load time where the CPU has
// it, converts twice as many values per instruction.
#define CALRT_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CALRT_SIMD_CLONES
#endif

CALRT_SIMD_CLONES
void widen_bf16(const std::byte* src, float* dst, size_t count) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    widen_bf16_16(src + 2 * i, dst + i);
  }
  for (; i < count; ++i) {
    uint16_t bits = 0;
    std::memcpy(&bits, src + 2 * i, sizeof(bits));
    dst[i] = calbin::bf16_to_f32(bits);
  }
}

// Values per block of widen_bf16_until_above: one bound test per 64 values keeps the test's
// horizontal reduction rare, as in the ranking scan of metrics.cpp.
constexpr size_t kTestBlock = 64;

// widen_bf16 of `blocks` blocks of kTestBlock values that also tests each converted value
// against `bound` while it is still in a register, so the ranking need not read the row
// again. Stops after the first block holding a value greater than `bound` (NaNs never are)
// and returns the number of blocks converted; `hit` says whether the last one has such a value.
CALRT_SIMD_CLONES
size_t widen_bf16_until_above(const std::byte* src, float* dst, size_t blocks, float bound,
                              bool& hit) {
  using Float8 = float __attribute__((vector_size(32)));
  using Mask8 = int32_t __attribute__((vector_size(32)));
  const Float8 b = Float8{} + bound;
  for (size_t block = 0; block < blocks; ++block) {
    const std::byte* s = src + block * kTestBlock * 2;
    float* d = dst + block * kTestBlock;
    Mask8 above = {};
    for (size_t j = 0; j < kTestBlock; j += 16) {
      widen_bf16_16(s + 2 * j, d + j);
      Float8 lo;
      Float8 hi;
      std::memcpy(&lo, d + j, sizeof(lo));
      std::memcpy(&hi, d + j + 8, sizeof(hi));
      above |= (lo > b) | (hi > b);
    }
    uint64_t words[4];
    std::memcpy(words, &above, sizeof(words));
    if ((words[0] | words[1] | words[2] | words[3]) != 0) {
      hit = true;
      return block + 1;
    }
  }
  hit = false;
  return blocks;
}

// The first of `blocks` blocks of kTestBlock BF16 values that may hold a value greater than
// `bound` (a BF16 value: the ranking's bound comes from the row), or `blocks`. Compared as
// 16-bit keys, 16 per 256-bit register: the row is read once, at memory speed, and nothing is
// written. The key is the BF16 bits as a signed integer with a negative value's magnitude
// bits flipped: strictly increasing with the value but for -0 < +0 (equal as floats) and
// NaNs (above everything). Both can only flag a block with nothing above the bound, which the
// ranker then sees in full and ranks exactly; neither can hide a value above it.
CALRT_SIMD_CLONES
size_t first_bf16_block_above(const std::byte* src, size_t blocks, float bound) {
  using Int16x16 = int16_t __attribute__((vector_size(32)));
  uint32_t bound_bits = 0;
  std::memcpy(&bound_bits, &bound, sizeof(bound_bits));
  const auto bound_top = static_cast<int16_t>(static_cast<uint16_t>(bound_bits >> 16));
  const auto bound_key = static_cast<int16_t>(bound_top ^ (bound_top < 0 ? 0x7FFF : 0));
  const Int16x16 b = Int16x16{} + bound_key;
  for (size_t block = 0; block < blocks; ++block) {
    const std::byte* s = src + block * kTestBlock * 2;
    Int16x16 above = {};
    for (size_t j = 0; j < kTestBlock; j += 16) {
      Int16x16 bits;
      std::memcpy(&bits, s + 2 * j, sizeof(bits));  // the mapping need not be aligned
      above |= (bits ^ ((bits >> 15) & 0x7FFF)) > b;
    }
    uint64_t words[4];
    std::memcpy(words, &above, sizeof(words));
    if ((words[0] | words[1] | words[2] | words[3]) != 0) {
      return block;
    }
  }
  return blocks;
}

// Whether any of the 16 BF16 values at `src` may be greater than `bound`, by the keys of
// first_bf16_block_above.
bool bf16_group_above(const std::byte* src, float bound) {
  uint32_t bound_bits = 0;
  std::memcpy(&bound_bits, &bound, sizeof(bound_bits));
  const auto top = static_cast<int16_t>(static_cast<uint16_t>(bound_bits >> 16));
  const int32_t bound_key = top ^ (top < 0 ? 0x7FFF : 0);
  bool above = false;
  for (size_t i = 0; i < 16; ++i) {
    int16_t bits = 0;
    std::memcpy(&bits, src + 2 * i, sizeof(bits));
    above |= (bits ^ (bits < 0 ? 0x7FFF : 0)) > bound_key;
  }
  return above;
}

// Physical element offset of logical (row, col).
size_t physical_index(const calrt::TensorDesc& desc, const Matrix2d& m, size_t row, size_t col) {
  if (desc.layout == calrt::Layout::tiled) {
    return calbin::tiled_index(row, col, m.rows, desc.tile_d0);
  }
  return row * m.cols + col;
}

}  // namespace

size_t element_bytes(calrt::Dtype dtype) {
  switch (dtype) {
    case calrt::Dtype::int32:
    case calrt::Dtype::f32:
      return 4;
    case calrt::Dtype::bf16:
    case calrt::Dtype::f16:
      return 2;
    case calrt::Dtype::int8:
      return 1;
    default:
      throw std::runtime_error(std::string("dtype ") + calrt::to_string(dtype) +
                               " has no whole-byte element size");
  }
}

Matrix2d physical_shape(const calrt::TensorDesc& desc) {
  if (desc.shape.empty()) {
    throw desc_error(desc, "rank 0");
  }
  Matrix2d m;
  m.rows = 1;
  for (size_t i = 0; i < desc.shape.size(); ++i) {
    if (desc.shape[i] <= 0) {
      throw desc_error(desc,
                       "dimension " + std::to_string(i) + " is " + std::to_string(desc.shape[i]));
    }
  }
  for (size_t i = 0; i + 1 < desc.shape.size(); ++i) {
    m.rows *= static_cast<size_t>(desc.shape[i]);
  }
  m.cols = static_cast<size_t>(desc.shape.back());
  if (desc.layout == calrt::Layout::tiled) {
    if (desc.tile_d0 == 0) {
      throw desc_error(desc, "layout tiled with tile_d0 0");
    }
    m.physical_elements = calbin::tiled_element_count(m.rows, m.cols, desc.tile_d0);
  } else {
    m.physical_elements = m.rows * m.cols;
  }
  const uint64_t expected = m.physical_elements * element_bytes(desc.dtype);
  if (desc.bytes != expected) {
    throw desc_error(desc, "descriptor says " + std::to_string(desc.bytes) + " bytes, shape, " +
                               "dtype and layout give " + std::to_string(expected));
  }
  return m;
}

std::vector<float> read_row_f32(std::span<const std::byte> mapped, const calrt::TensorDesc& desc,
                                size_t row) {
  std::vector<float> out(physical_shape(desc).cols);
  read_row_f32_into(mapped, desc, row, out);
  return out;
}

namespace {

// Checks a read of row `row` into `out` and calls read_run(first, count, col) for each
// contiguous run of the row, in increasing col: `count` values at physical element `first`
// that belong at out[col]. One run for row-major; for tiled one per tile, except that with a
// single row the tiles follow each other and form one run too. physical_shape() has checked
// that every run lies inside the mapping.
template <class ReadRun>
void for_each_run(std::span<const std::byte> mapped, const calrt::TensorDesc& desc, size_t row,
                  size_t out_size, ReadRun read_run) {
  const Matrix2d m = physical_shape(desc);
  if (desc.dtype != calrt::Dtype::bf16 && desc.dtype != calrt::Dtype::f32) {
    throw desc_error(desc, std::string("cannot read dtype ") + calrt::to_string(desc.dtype));
  }
  if (mapped.size() != desc.bytes) {
    throw desc_error(desc, "mapped " + std::to_string(mapped.size()) + " bytes, descriptor says " +
                               std::to_string(desc.bytes));
  }
  if (row >= m.rows) {
    throw desc_error(desc, "row " + std::to_string(row) + " of " + std::to_string(m.rows));
  }
  if (out_size != m.cols) {
    throw desc_error(desc, "output holds " + std::to_string(out_size) + " values for a row of " +
                               std::to_string(m.cols));
  }
  if (desc.layout != calrt::Layout::tiled) {
    read_run(row * m.cols, m.cols, size_t{0});
    return;
  }
  if (m.rows == 1) {
    read_run(size_t{0}, m.cols, size_t{0});
    return;
  }
  const size_t d0 = desc.tile_d0;
  const size_t tile_stride = m.rows * d0;
  size_t first = row * d0;
  for (size_t col = 0; col < m.cols; col += d0, first += tile_stride) {
    read_run(first, std::min(d0, m.cols - col), col);
  }
}

// Converts `count` physical elements at `first` into dst.
void convert_run(std::span<const std::byte> mapped, calrt::Dtype dtype, size_t first, size_t count,
                 float* dst) {
  if (dtype == calrt::Dtype::bf16) {
    widen_bf16(mapped.data() + first * 2, dst, count);
  } else {
    std::memcpy(dst, mapped.data() + first * 4, count * sizeof(float));  // may be unaligned
  }
}

// Values of short runs converted before they are ranked: 16 KiB of FP32 (plus 8 KiB of BF16 read)
// stays in L1 until the ranking reads it back, and is long enough that the per-piece overhead of
// the scan is negligible. A multiple of the scan's 64-value block, so no piece but the last has a
// scalar tail.
constexpr size_t kPickPiece = 4096;

}  // namespace

void read_row_f32_into(std::span<const std::byte> mapped, const calrt::TensorDesc& desc, size_t row,
                       std::span<float> out) {
  for_each_run(mapped, desc, row, out.size(), [&](size_t first, size_t count, size_t col) {
    convert_run(mapped, desc.dtype, first, count, out.data() + col);
  });
}

void visit_row_bytes(std::span<const std::byte> mapped, const calrt::TensorDesc& desc, size_t row,
                     size_t cols, const std::function<void(std::span<const std::byte>)>& visit) {
  const size_t size = element_bytes(desc.dtype);
  for_each_run(mapped, desc, row, cols, [&](size_t first, size_t count, size_t /*col*/) {
    visit(mapped.subspan(first * size, count * size));
  });
}

RowPick read_row_pick(std::span<const std::byte> mapped, const calrt::TensorDesc& desc, size_t row,
                      std::span<float> out, size_t k) {
  RowRanker ranker(k);
  size_t ranked = 0;  // out[0, ranked) has gone to the ranker
  for_each_run(mapped, desc, row, out.size(), [&](size_t first, size_t count, size_t col) {
    if (desc.dtype == calrt::Dtype::bf16 && count >= kTestBlock) {
      // A long BF16 run (the usual single logits row): the conversion tests each block
      // against the ranking's bound, and only the rare blocks above it reach the ranker.
      ranker.add(out.subspan(ranked, col - ranked));  // gathered short runs, if any
      const std::byte* src = mapped.data() + first * 2;
      float* dst = out.data() + col;
      const size_t blocks = count / kTestBlock;
      for (size_t done = 0; done < blocks;) {
        const std::optional<float> bound = ranker.bound();
        if (!bound) {  // the ranking is still filling: every number counts
          widen_bf16(src + done * kTestBlock * 2, dst + done * kTestBlock, kTestBlock);
          ranker.add({dst + done * kTestBlock, kTestBlock});
          ++done;
          continue;
        }
        bool hit = false;
        const size_t n = widen_bf16_until_above(
            src + done * kTestBlock * 2, dst + done * kTestBlock, blocks - done, *bound, hit);
        const size_t quiet = hit ? n - 1 : n;
        ranker.skip(quiet * kTestBlock);
        done += n;
        if (hit) {
          ranker.add({dst + (done - 1) * kTestBlock, kTestBlock});
        }
      }
      const size_t tail = blocks * kTestBlock;
      widen_bf16(src + tail * 2, dst + tail, count - tail);
      ranker.add({dst + tail, count - tail});
      ranked = col + count;
      return;
    }
    // Short runs (a strided tiled row) are gathered until a piece is full.
    for (size_t done = 0; done < count;) {
      const size_t take = std::min(count - done, kPickPiece - (col + done - ranked));
      convert_run(mapped, desc.dtype, first + done, take, out.data() + col + done);
      done += take;
      if (col + done - ranked == kPickPiece) {
        ranker.add(out.subspan(ranked, kPickPiece));
        ranked += kPickPiece;
      }
    }
  });
  ranker.add(out.subspan(ranked));
  return {ranker.argmax(), ranker.top_k(out)};
}

RowPick rank_row(std::span<const std::byte> mapped, const calrt::TensorDesc& desc, size_t row,
                 size_t k) {
  RowRanker ranker(k);
  // A piece of converted values for the ranker, reused: the blocks above the bound and the
  // short runs of a strided row land here, never in a row-sized buffer.
  std::vector<float> scratch(kPickPiece);
  size_t gathered = 0;  // values in scratch not yet ranked
  auto flush = [&] {
    ranker.add({scratch.data(), gathered});
    gathered = 0;
  };
  const size_t columns = physical_shape(desc).cols;
  for_each_run(mapped, desc, row, columns, [&](size_t first, size_t count, size_t) {
    if (desc.dtype == calrt::Dtype::bf16 && count >= kTestBlock) {
      flush();
      const std::byte* src = mapped.data() + first * 2;
      const size_t blocks = count / kTestBlock;
      for (size_t done = 0; done < blocks;) {
        const std::optional<float> bound = ranker.bound();
        if (!bound) {  // the ranking is still filling: every number counts
          widen_bf16(src + done * kTestBlock * 2, scratch.data(), kTestBlock);
          ranker.add({scratch.data(), kTestBlock});
          ++done;
          continue;
        }
        const size_t hit =
            done + first_bf16_block_above(src + done * kTestBlock * 2, blocks - done, *bound);
        ranker.skip((hit - done) * kTestBlock);
        if (hit == blocks) break;
        // Early in the row the bound is low and most blocks hold something above it: rank
        // only the groups of 16 that do, against the bound as each one raises it.
        for (size_t group = 0; group < kTestBlock; group += 16) {
          const std::byte* g = src + (hit * kTestBlock + group) * 2;
          if (bf16_group_above(g, *ranker.bound())) {
            widen_bf16(g, scratch.data(), 16);
            ranker.add({scratch.data(), 16});
          } else {
            ranker.skip(16);
          }
        }
        done = hit + 1;
      }
      const size_t tail = blocks * kTestBlock;
      widen_bf16(src + tail * 2, scratch.data(), count - tail);
      ranker.add({scratch.data(), count - tail});
      return;
    }
    for (size_t done = 0; done < count;) {
      const size_t take = std::min(count - done, kPickPiece - gathered);
      convert_run(mapped, desc.dtype, first + done, take, scratch.data() + gathered);
      done += take;
      gathered += take;
      if (gathered == kPickPiece) flush();
    }
  });
  flush();
  if (k > 0 && !ranker.bound()) {
    // Fewer numbers than k: the NaNs fill the last places by id, which takes the row.
    return {ranker.argmax(), ranker.top_k(read_row_f32(mapped, desc, row))};
  }
  return {ranker.argmax(), ranker.top_k_of_numbers()};
}

namespace {

// Writes values[i] at logical place(i) = (row, col) after zeroing the whole tensor; room(m)
// is how many values the shape takes, `what` names it in the error when they do not fit.
template <class Room, class Place>
void write_i32(std::span<std::byte> mapped, const calrt::TensorDesc& desc,
               std::span<const int32_t> values, Room room, const char* what, Place place) {
  const Matrix2d m = physical_shape(desc);
  if (desc.dtype != calrt::Dtype::int32) {
    throw desc_error(desc, std::string("expected int32, is ") + calrt::to_string(desc.dtype));
  }
  if (mapped.size() != desc.bytes) {
    throw desc_error(desc, "mapped " + std::to_string(mapped.size()) + " bytes, descriptor says " +
                               std::to_string(desc.bytes));
  }
  if (values.size() > room(m)) {
    throw desc_error(desc, std::to_string(values.size()) + " values for " + what + " of " +
                               std::to_string(room(m)));
  }
  std::memset(mapped.data(), 0, mapped.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const auto [row, col] = place(i);
    std::memcpy(mapped.data() + physical_index(desc, m, row, col) * sizeof(int32_t), &values[i],
                sizeof(int32_t));
  }
}

}  // namespace

void write_row_i32(std::span<std::byte> mapped, const calrt::TensorDesc& desc,
                   std::span<const int32_t> values) {
  write_i32(
      mapped, desc, values, [](const Matrix2d& m) { return m.cols; }, "a row",
      [](size_t i) {
        return std::pair<size_t, size_t>{0, i};
      });
}

void write_column_i32(std::span<std::byte> mapped, const calrt::TensorDesc& desc,
                      std::span<const int32_t> values) {
  write_i32(
      mapped, desc, values, [](const Matrix2d& m) { return m.rows; }, "a column",
      [](size_t i) {
        return std::pair<size_t, size_t>{i, 0};
      });
}

}  // namespace runner
