// Internal to the calbin library: the .npy header, a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// parsed without a Python evaluator and written byte-for-byte as NumPy writes it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace calbin::detail {

// NumPy's own limit on dimensions was 32 for most of its history.
inline constexpr size_t kMaxNpyRank = 32;
// Bounds the header read from a file; NumPy's headers are a few hundred bytes.
inline constexpr uint32_t kMaxNpyHeaderBytes = uint32_t{1} << 20;

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Throws FieldError (field "descr", "shape", "fortran_order" or "header") on bad input.
NpyHeader parse_npy_header(std::string_view text);

// The complete file prefix (magic, version 1.0, length, dict, padding, '\n'), padded so the
// data starts at a multiple of 64 bytes, with NumPy's spare room for growing the first axis.
std::string format_npy_header(std::string_view descr, const std::vector<int64_t>& shape);

}  // namespace calbin::detail
