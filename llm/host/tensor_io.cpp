#include "llm/host/tensor_io.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "calbin/bf16.hpp"
#include "calbin/layout.hpp"
#include "llm/host/ranking.hpp"

namespace calrt::llm {
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

// A sanitizer instruments the clones' resolver, which the dynamic loader runs while it
// relocates this shared library, before the sanitizer's runtime has started: under
// ThreadSanitizer or AddressSanitizer every binary linking the library would crash before
// main (seen under ASan once the library became libcalrt_llm.so, loaded at start-up).
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define CALRT_SANITIZER_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define CALRT_SANITIZER_BUILD 1
#endif
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(CALRT_SANITIZER_BUILD)
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

// The 16-bit order key of a BF16 value: its bits as a signed integer with a negative value's
// magnitude bits flipped. Strictly increasing with the value but for -0 < +0 (equal as floats)
// and NaNs (a positive NaN above everything, a negative one below). Either can only make a
// test below flag a value that is not above the bound, which the ranker then rejects; neither
// can hide a value above it.
inline int16_t bf16_key(int16_t bits) {
  return static_cast<int16_t>(bits ^ ((bits >> 15) & 0x7FFF));
}

// The key of a ranking bound, a value from the row (so exactly a BF16 value).
int16_t bound_key(float bound) {
  uint32_t bits = 0;
  std::memcpy(&bits, &bound, sizeof(bits));
  return bf16_key(static_cast<int16_t>(static_cast<uint16_t>(bits >> 16)));
}

// The first of `blocks` blocks of kTestBlock BF16 values that may hold a value greater than
// `bound`, or `blocks`. Each block's largest key is taken 16 at a time in a 256-bit register
// and compared once: the row is read once, at memory speed, and nothing is written. A bound
// of +0 or more needs no key at all: a negative value's bits are a negative integer, below
// it, and a positive value's bits are its key.
CALRT_SIMD_CLONES
size_t first_bf16_block_above(const std::byte* src, size_t blocks, float bound) {
  using Int16x16 = int16_t __attribute__((vector_size(32)));
  const int16_t key = bound_key(bound);
  const Int16x16 b = Int16x16{} + key;
  const bool raw = key >= 0;
  for (size_t block = 0; block < blocks; ++block) {
    const std::byte* s = src + block * kTestBlock * 2;
    Int16x16 top;
    std::memcpy(&top, s, sizeof(top));  // the mapping need not be aligned
    if (!raw) top = top ^ ((top >> 15) & 0x7FFF);
    for (size_t j = 16; j < kTestBlock; j += 16) {
      Int16x16 bits;
      std::memcpy(&bits, s + 2 * j, sizeof(bits));
      if (!raw) bits = bits ^ ((bits >> 15) & 0x7FFF);
      top = top > bits ? top : bits;
    }
    const Int16x16 above = top > b;
    uint64_t words[4];
    std::memcpy(words, &above, sizeof(words));
    if ((words[0] | words[1] | words[2] | words[3]) != 0) {
      return block;
    }
  }
  return blocks;
}

// Ranks the `count` BF16 values at `src` (a multiple of 16), the next ones of the row,
// offering the ranker only those whose key exceeds `floor_key`, or the key of its bound once it
// has one: one at a time in id order, against the bound as each one raises it.
CALRT_SIMD_CLONES
void rank_bf16_above(const std::byte* src, size_t count, int16_t floor_key, RowRanker& ranker) {
  using Int16x16 = int16_t __attribute__((vector_size(32)));
  auto above_of = [&] {
    const std::optional<float> bound = ranker.bound();
    return bound ? std::max(floor_key, bound_key(*bound)) : floor_key;
  };
  int16_t above = above_of();
  size_t next = 0;  // values of the block the ranker has seen
  for (size_t group = 0; group < count; group += 16) {
    Int16x16 bits16;
    std::memcpy(&bits16, src + 2 * group, sizeof(bits16));
    const Int16x16 hit = (bits16 ^ ((bits16 >> 15) & 0x7FFF)) > (Int16x16{} + above);
    uint64_t words[4];
    std::memcpy(words, &hit, sizeof(words));
    if ((words[0] | words[1] | words[2] | words[3]) == 0) {
      continue;
    }
    for (size_t i = group; i < group + 16; ++i) {
      int16_t bits = 0;
      std::memcpy(&bits, src + 2 * i, sizeof(bits));
      if (bf16_key(bits) > above) {
        ranker.skip(i - next);
        ranker.add_one(calbin::bf16_to_f32(static_cast<uint16_t>(bits)));
        next = i + 1;
        above = above_of();
      }
    }
  }
  ranker.skip(count - next);
}

// Values per block of rank_bf16_by_floor's first pass: long enough that taking each block's
// maximum across its register lanes costs little beside reading it.
constexpr size_t kFloorBlock = 256;
// rank_bf16_by_floor's histogram of block maxima: a bucket per 16 BF16 codes of a value of
// +0 or more (an eighth of an octave), up to the NaNs.
constexpr size_t kFloorBuckets = 0x8000 >> 4;

// The largest BF16 bits, as a signed integer, of each of `blocks` blocks of kFloorBlock values
// into tops[], and the count of those that are not negative per bucket of `histogram`; returns
// the largest. A value of +0 or more has bits that order as the value; a negative value's bits
// are negative. With `widened`, also widens every value into it on the way.
CALRT_SIMD_CLONES
int16_t bf16_block_tops(const std::byte* src, size_t blocks, int16_t* tops, uint32_t* histogram,
                        float* widened) {
  int16_t highest = std::numeric_limits<int16_t>::min();
  using Int16x16 = int16_t __attribute__((vector_size(32)));
  using Int16x8 = int16_t __attribute__((vector_size(16)));
  for (size_t block = 0; block < blocks; ++block) {
    const std::byte* s = src + block * kFloorBlock * 2;
    if (widened != nullptr) {
      for (size_t j = 0; j < kFloorBlock; j += 16) {
        widen_bf16_16(s + 2 * j, widened + block * kFloorBlock + j);
      }
    }
    Int16x16 top16;
    std::memcpy(&top16, s, sizeof(top16));  // the mapping need not be aligned
    for (size_t j = 16; j < kFloorBlock; j += 16) {
      Int16x16 bits;
      std::memcpy(&bits, s + 2 * j, sizeof(bits));
      top16 = top16 > bits ? top16 : bits;
    }
    const Int16x8 lo = __builtin_shufflevector(top16, top16, 0, 1, 2, 3, 4, 5, 6, 7);
    const Int16x8 hi = __builtin_shufflevector(top16, top16, 8, 9, 10, 11, 12, 13, 14, 15);
    Int16x8 top8 = lo > hi ? lo : hi;
    Int16x8 other = __builtin_shufflevector(top8, top8, 4, 5, 6, 7, 0, 1, 2, 3);
    top8 = top8 > other ? top8 : other;
    other = __builtin_shufflevector(top8, top8, 2, 3, 0, 1, 4, 5, 6, 7);
    top8 = top8 > other ? top8 : other;
    const int16_t top = std::max(top8[0], top8[1]);
    tops[block] = top;
    highest = std::max(highest, top);
    if (top >= 0) {
      ++histogram[static_cast<uint16_t>(top) >> 4];
    }
  }
  return highest;
}

// rank_row of the whole BF16 row at `src` (`count` values) into a ranker that has seen
// nothing, in two passes; false, with nothing ranked, for a row it does not suit. The first
// pass takes each block's maximum, and the k-th largest of those is a floor: `capacity`
// values of the row reach it, so none below it can rank. The second ranks only the blocks
// whose maximum reaches the floor and passes over the rest unread. The one-pass scan would
// instead offer each value that beats the ranking so far, about k ln(n / k) of them in
// random order, nearly every block early in the row.
//
// It suits a row whose floor is above +0 (a -0, equal to +0, has negative bits) and that has
// no +inf or NaN, whose bits would sit among the maxima without being ranked numbers.
//
// With `widened` (read_row_pick), the first pass also widens the row into it, and the ranker
// reads the tail from there; otherwise the tail goes through `scratch`. Declining after the
// first pass leaves `widened` written, which the caller's one-pass path writes again.
bool rank_bf16_by_floor(const std::byte* src, size_t count, size_t capacity, RowRanker& ranker,
                        float* widened, std::span<float> scratch) {
  const size_t blocks = count / kFloorBlock;
  if (blocks < capacity) {
    return false;
  }
  std::vector<int16_t> tops(blocks);
  std::array<uint32_t, kFloorBuckets> histogram{};
  const int16_t highest = bf16_block_tops(src, blocks, tops.data(), histogram.data(), widened);
  if (highest < 0 || highest >= 0x7F80) {
    return false;  // no block reaches +0, or one holds +inf or a NaN
  }
  size_t reaching = 0;  // block maxima in buckets at `bucket` and above
  size_t bucket = (static_cast<size_t>(highest) >> 4) + 1;
  while (bucket > 0 && reaching + histogram[bucket - 1] < capacity) {
    reaching += histogram[--bucket];
  }
  if (bucket == 0) {
    return false;  // fewer than `capacity` blocks reach +0
  }
  --bucket;
  std::vector<int16_t> in_bucket;
  for (const int16_t top : tops) {
    if (top >= 0 && static_cast<size_t>(static_cast<uint16_t>(top) >> 4) == bucket) {
      in_bucket.push_back(top);
    }
  }
  const size_t rank = capacity - reaching;  // 1 <= rank <= in_bucket.size()
  std::nth_element(in_bucket.begin(), in_bucket.begin() + static_cast<std::ptrdiff_t>(rank - 1),
                   in_bucket.end(), std::greater<>());
  const int16_t floor = in_bucket[rank - 1];
  if (floor <= 0) {
    return false;
  }
  size_t passed = 0;  // blocks passed over since the last one ranked
  for (size_t block = 0; block < blocks; ++block) {
    if (tops[block] < floor) {
      ++passed;
      continue;
    }
    ranker.skip(passed * kFloorBlock);
    passed = 0;
    // floor > 0: its bits are its key.
    rank_bf16_above(src + block * kFloorBlock * 2, kFloorBlock, static_cast<int16_t>(floor - 1),
                    ranker);
  }
  ranker.skip(passed * kFloorBlock);
  const size_t tail = blocks * kFloorBlock;
  if (widened != nullptr) {
    widen_bf16(src + tail * 2, widened + tail, count - tail);
    ranker.add({widened + tail, count - tail});
    return true;
  }
  for (size_t done = tail; done < count; done += scratch.size()) {
    const size_t take = std::min(scratch.size(), count - done);
    widen_bf16(src + done * 2, scratch.data(), take);
    ranker.add({scratch.data(), take});
  }
  return true;
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
    if (desc.dtype == calrt::Dtype::bf16 && count == out.size() &&
        rank_bf16_by_floor(mapped.data() + first * 2, count, std::max<size_t>(k, 1), ranker,
                           out.data(), {})) {
      ranked = count;  // the row in one run
      return;
    }
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
    if (desc.dtype == calrt::Dtype::bf16 && count == columns &&
        rank_bf16_by_floor(mapped.data() + first * 2, count, std::max<size_t>(k, 1), ranker,
                           nullptr, scratch)) {
      return;  // the row in one run
    }
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
        rank_bf16_above(src + hit * kTestBlock * 2, kTestBlock, std::numeric_limits<int16_t>::min(),
                        ranker);
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

}  // namespace calrt::llm
