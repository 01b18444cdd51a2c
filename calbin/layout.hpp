// Converting a 2-D logical tensor [rows, cols] to and from its physical layout.
//
// Row-major is C order. Tiled (tile_d0 = d0) cuts the last dimension into tiles of d0
// elements and makes the tile index outermost: element (r, c) lives at
// ((c / d0) * rows + r) * d0 + c % d0, and the buffer holds ceil(cols / d0) * rows * d0
// elements, the tail zero-padded. Higher-rank tensors fold their leading dimensions into
// rows. The tile size always comes from the tensor's descriptor.
#pragma once

#include <cstddef>
#include <cstdint>

namespace calbin {

inline size_t tiled_index(size_t row, size_t col, size_t rows, uint32_t tile_d0) {
  const size_t d0 = tile_d0;
  return ((col / d0) * rows + row) * d0 + col % d0;
}

inline size_t tiled_element_count(size_t rows, size_t cols, uint32_t tile_d0) {
  const size_t d0 = tile_d0;
  return ((cols + d0 - 1) / d0) * rows * d0;
}

// Copies logical row-major `src` into physical `dst` (tiled when tile_d0 > 0). dst must
// hold tiled_element_count() elements; padding is left as the caller initialised it.
template <class T>
void to_physical(const T* src, T* dst, size_t rows, size_t cols, uint32_t tile_d0) {
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const size_t at = tile_d0 == 0 ? r * cols + c : tiled_index(r, c, rows, tile_d0);
      dst[at] = src[r * cols + c];
    }
  }
}

// The inverse of to_physical.
template <class T>
void to_logical(const T* src, T* dst, size_t rows, size_t cols, uint32_t tile_d0) {
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      const size_t at = tile_d0 == 0 ? r * cols + c : tiled_index(r, c, rows, tile_d0);
      dst[r * cols + c] = src[at];
    }
  }
}

}  // namespace calbin
