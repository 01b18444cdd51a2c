// NumPy .npy arrays (format versions 1.0-3.0 read, 1.0 written), the form reference teams
// produce golden data in. Only little-endian, C-order arrays of the dtypes below are
// accepted; anything else is an error naming the file and header field.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "calbin/result.hpp"

namespace calbin {

struct NpyArray {
  std::string descr;  // "<f4", "<i4", "|i1", "<u2", "<i8"
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // raw little-endian elements, C order

  int64_t element_count() const;
};

Result<NpyArray> read_npy(const std::filesystem::path& path);
// Writes atomically (temporary file, then rename).
Result<void> write_npy(const std::filesystem::path& path, const NpyArray& array);

// Typed helpers: read and require a dtype (and, when expected_rank >= 0, a rank).
Result<std::vector<float>> read_npy_f32(const std::filesystem::path& path,
                                        std::vector<int64_t>* shape_out = nullptr);
Result<std::vector<int32_t>> read_npy_i32(const std::filesystem::path& path,
                                          std::vector<int64_t>* shape_out = nullptr);
Result<void> write_npy_f32(const std::filesystem::path& path, const std::vector<int64_t>& shape,
                           const std::vector<float>& values);
Result<void> write_npy_i32(const std::filesystem::path& path, const std::vector<int64_t>& shape,
                           const std::vector<int32_t>& values);

}  // namespace calbin
