#include "simdev/gen/weights/shard.hpp"

#include <cassert>
#include <cstring>

namespace simdev::gen {

ShardRange shard_range(uint64_t size, uint32_t index, uint32_t count) {
  assert(count > 0);
  assert(index < count);
  return ShardRange{index * size / count, (index + 1) * size / count};
}

std::vector<uint8_t> slice_matrix(std::span<const uint8_t> matrix, size_t rows, size_t cols,
                                  size_t element_bytes, int axis, ShardRange range) {
  assert(matrix.size() == rows * cols * element_bytes);
  assert(axis == 0 || axis == 1);
  const size_t row_bytes = cols * element_bytes;
  if (axis == 0) {
    assert(range.end <= rows);
    const auto first = matrix.begin() + static_cast<std::ptrdiff_t>(range.begin * row_bytes);
    const auto last = matrix.begin() + static_cast<std::ptrdiff_t>(range.end * row_bytes);
    return std::vector<uint8_t>(first, last);
  }
  assert(range.end <= cols);
  const size_t slice_bytes = range.size() * element_bytes;
  std::vector<uint8_t> out(rows * slice_bytes);
  for (size_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + r * slice_bytes,
                matrix.data() + r * row_bytes + range.begin * element_bytes, slice_bytes);
  }
  return out;
}

}  // namespace simdev::gen
