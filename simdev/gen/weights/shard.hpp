// Tensor-parallel slicing (calbin/MODEL.md): shard c of n along an axis covers
// [c*size/n, (c+1)*size/n) and lives on chip c.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace simdev::gen {

struct ShardRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t size() const { return end - begin; }
};

ShardRange shard_range(uint64_t size, uint32_t index, uint32_t count);

// The slice [range) along `axis` (0: rows, 1: columns) of a row-major [rows, cols] matrix of
// elements of `element_bytes` bytes, as raw row-major bytes.
std::vector<uint8_t> slice_matrix(std::span<const uint8_t> matrix, size_t rows, size_t cols,
                                  size_t element_bytes, int axis, ShardRange range);

}  // namespace simdev::gen
