#include "runner/tensor_io.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "calbin/bf16.hpp"
#include "calbin/layout.hpp"

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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
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

void read_row_f32_into(std::span<const std::byte> mapped, const calrt::TensorDesc& desc, size_t row,
                       std::span<float> out) {
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
  if (out.size() != m.cols) {
    throw desc_error(desc, "output holds " + std::to_string(out.size()) + " values for a row of " +
                               std::to_string(m.cols));
  }
  // The row is a series of contiguous runs: one for row-major, and for tiled one per tile,
  // except that with a single row the tiles follow each other and form one run too.
  // physical_shape() has checked that every run lies inside the mapping.
  const size_t width = element_bytes(desc.dtype);
  const bool bf16 = desc.dtype == calrt::Dtype::bf16;
  auto read_run = [&](size_t first, size_t count, float* dst) {
    const std::byte* src = mapped.data() + first * width;
    if (bf16) {
      widen_bf16(src, dst, count);
    } else {
      std::memcpy(dst, src, count * sizeof(float));  // the mapping need not be aligned
    }
  };
  if (desc.layout != calrt::Layout::tiled) {
    read_run(row * m.cols, m.cols, out.data());
    return;
  }
  if (m.rows == 1) {
    read_run(0, m.cols, out.data());
    return;
  }
  const size_t d0 = desc.tile_d0;
  const size_t tile_stride = m.rows * d0;
  size_t first = row * d0;
  for (size_t col = 0; col < m.cols; col += d0, first += tile_stride) {
    read_run(first, std::min(d0, m.cols - col), out.data() + col);
  }
}

void write_row_i32(std::span<std::byte> mapped, const calrt::TensorDesc& desc,
                   std::span<const int32_t> values) {
  const Matrix2d m = physical_shape(desc);
  if (desc.dtype != calrt::Dtype::int32) {
    throw desc_error(desc, std::string("expected int32, is ") + calrt::to_string(desc.dtype));
  }
  if (mapped.size() != desc.bytes) {
    throw desc_error(desc, "mapped " + std::to_string(mapped.size()) + " bytes, descriptor says " +
                               std::to_string(desc.bytes));
  }
  if (values.size() > m.cols) {
    throw desc_error(
        desc, std::to_string(values.size()) + " values for a row of " + std::to_string(m.cols));
  }
  std::memset(mapped.data(), 0, mapped.size());
  for (size_t col = 0; col < values.size(); ++col) {
    std::memcpy(mapped.data() + physical_index(desc, m, 0, col) * sizeof(int32_t), &values[col],
                sizeof(int32_t));
  }
}

}  // namespace runner
