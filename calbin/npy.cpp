// Reading and writing .npy arrays. The file's size is checked against the header's shape
// before any data is allocated, so a hostile header cannot make the reader allocate more than
// the file holds.
#include "calbin/npy.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>

#include "calbin/field_error.hpp"
#include "calbin/file_io.hpp"
#include "calbin/npy_header.hpp"

namespace calbin {
namespace fs = std::filesystem;
namespace {

static_assert(std::endian::native == std::endian::little,
              "the typed .npy helpers copy little-endian data as is");

using detail::FieldError;

constexpr std::array<std::pair<std::string_view, uint64_t>, 7> kItemSizes{{
    {"<f4", 4},
    {"<i4", 4},
    {"|i1", 1},
    {"<i1", 1},
    {"<u2", 2},
    {"<i8", 8},
    {"<f8", 8},
}};

std::optional<uint64_t> item_size(std::string_view descr) {
  for (const auto& [name, size] : kItemSizes) {
    if (name == descr) {
      return size;
    }
  }
  return std::nullopt;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  }
  return text + "]";
}

// Bytes of data the shape needs, or nullopt on a negative dimension or 64-bit overflow.
std::optional<uint64_t> data_bytes(const std::vector<int64_t>& shape, uint64_t item_bytes) {
  uint64_t total = item_bytes;
  for (const int64_t dim : shape) {
    if (dim < 0) {
      return std::nullopt;
    }
    const auto size = static_cast<uint64_t>(dim);
    if (size != 0 && total > std::numeric_limits<uint64_t>::max() / size) {
      return std::nullopt;
    }
    total *= size;
  }
  return total;
}

void read_exact(std::ifstream& in, char* data, uint64_t size, const char* what) {
  in.read(data, static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in.gcount()) != size) {
    throw FieldError{"", std::string("file ends inside the ") + what};
  }
}

// Returns the header's length and advances past the magic, version and length fields.
uint64_t read_preamble(std::ifstream& in, uint64_t file_size) {
  std::array<char, 8> magic{};
  read_exact(in, magic.data(), magic.size(), "magic string");
  if (std::memcmp(magic.data(), "\x93NUMPY", 6) != 0) {
    throw FieldError{"", "not a .npy file (bad magic string)"};
  }
  const auto major = static_cast<uint8_t>(magic[6]);
  const auto minor = static_cast<uint8_t>(magic[7]);
  if (major < 1 || major > 3 || minor != 0) {
    throw FieldError{"version", "unsupported .npy version " + std::to_string(major) + "." +
                                    std::to_string(minor) + " (1.0, 2.0 and 3.0 are read)"};
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  std::array<unsigned char, 4> raw{};
  read_exact(in, reinterpret_cast<char*>(raw.data()), length_bytes, "header length");
  uint64_t length = 0;
  for (size_t i = length_bytes; i-- > 0;) {
    length = (length << 8) | raw[i];
  }
  if (length > detail::kMaxNpyHeaderBytes || 8 + length_bytes + length > file_size) {
    throw FieldError{"header", "header length " + std::to_string(length) +
                                   " runs past the end of the file or the " +
                                   std::to_string(detail::kMaxNpyHeaderBytes) + "-byte limit"};
  }
  return length;
}

NpyArray read_or_throw(const fs::path& path) {
  std::error_code error;
  const uint64_t file_size = fs::file_size(path, error);
  std::ifstream in(path, std::ios::binary);
  if (error || !in) {
    throw FieldError{"", "cannot open for reading" + (error ? ": " + error.message() : "")};
  }
  const uint64_t header_length = read_preamble(in, file_size);
  std::string text(static_cast<size_t>(header_length), '\0');
  read_exact(in, text.data(), header_length, "header");
  detail::NpyHeader header = detail::parse_npy_header(text);
  const std::optional<uint64_t> item_bytes = item_size(header.descr);
  if (!item_bytes) {
    throw FieldError{"descr", "unsupported dtype '" + header.descr +
                                  "' (accepted: <f4 <i4 |i1 <i1 <u2 <i8 <f8)"};
  }
  if (header.fortran_order) {
    throw FieldError{"fortran_order", "True; only C-order arrays are accepted"};
  }
  const std::optional<uint64_t> needed = data_bytes(header.shape, *item_bytes);
  if (!needed) {
    throw FieldError{"shape", "shape " + shape_text(header.shape) + " overflows 64-bit arithmetic"};
  }
  const uint64_t available = file_size - static_cast<uint64_t>(in.tellg());
  if (available != *needed) {
    throw FieldError{"", "data is " + std::to_string(available) + " bytes but shape " +
                             shape_text(header.shape) + " of '" + header.descr + "' needs " +
                             std::to_string(*needed) +
                             (available < *needed ? " (truncated)" : " (trailing bytes)")};
  }
  NpyArray array{std::move(header.descr), std::move(header.shape), {}};
  array.data.resize(static_cast<size_t>(*needed));
  read_exact(in, reinterpret_cast<char*>(array.data.data()), *needed, "data");
  return array;
}

template <class T>
Result<std::vector<T>> read_typed(const fs::path& path, std::string_view descr,
                                  std::vector<int64_t>* shape_out) {
  Result<NpyArray> array = read_npy(path);
  if (!array) {
    return tl::unexpected(array.error());
  }
  if (array->descr != descr) {
    return fail(path.string(), "descr",
                "dtype '" + array->descr + "' but '" + std::string(descr) + "' is required");
  }
  std::vector<T> values(array->data.size() / sizeof(T));
  if (!values.empty()) {  // memcpy from an empty vector's null data() is undefined
    std::memcpy(values.data(), array->data.data(), values.size() * sizeof(T));
  }
  if (shape_out != nullptr) {
    *shape_out = std::move(array->shape);
  }
  return values;
}

template <class T>
Result<void> write_typed(const fs::path& path, std::string_view descr,
                         const std::vector<int64_t>& shape, const std::vector<T>& values) {
  NpyArray array{std::string(descr), shape, std::vector<uint8_t>(values.size() * sizeof(T))};
  if (!values.empty()) {
    std::memcpy(array.data.data(), values.data(), array.data.size());
  }
  return write_npy(path, array);
}

}  // namespace

int64_t NpyArray::element_count() const {
  int64_t count = 1;
  for (const int64_t dim : shape) {
    if (dim < 0 || (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim)) {
      return -1;  // not a valid shape
    }
    count *= dim;
  }
  return count;
}

Result<NpyArray> read_npy(const fs::path& path) {
  try {
    return read_or_throw(path);
  } catch (const FieldError& error) {
    return fail(path.string(), error.field, error.message);
  } catch (const std::exception& error) {
    return fail(path.string(), "", std::string("unexpected error: ") + error.what());
  }
}

Result<void> write_npy(const fs::path& path, const NpyArray& array) {
  const std::optional<uint64_t> item_bytes = item_size(array.descr);
  if (!item_bytes) {
    return fail(path.string(), "descr", "unsupported dtype '" + array.descr + "'");
  }
  if (array.shape.size() > detail::kMaxNpyRank) {
    return fail(path.string(), "shape",
                "rank " + std::to_string(array.shape.size()) + " exceeds " +
                    std::to_string(detail::kMaxNpyRank));
  }
  const std::optional<uint64_t> needed = data_bytes(array.shape, *item_bytes);
  if (!needed || *needed != array.data.size()) {
    return fail(path.string(), "shape",
                "shape " + shape_text(array.shape) + " of '" + array.descr + "' does not match " +
                    std::to_string(array.data.size()) + " bytes of data");
  }
  std::string bytes = detail::format_npy_header(array.descr, array.shape);
  bytes.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  return detail::write_file_atomic(path, bytes);
}

Result<std::vector<float>> read_npy_f32(const fs::path& path, std::vector<int64_t>* shape_out) {
  return read_typed<float>(path, "<f4", shape_out);
}

Result<std::vector<int32_t>> read_npy_i32(const fs::path& path, std::vector<int64_t>* shape_out) {
  return read_typed<int32_t>(path, "<i4", shape_out);
}

Result<void> write_npy_f32(const fs::path& path, const std::vector<int64_t>& shape,
                           const std::vector<float>& values) {
  return write_typed(path, "<f4", shape, values);
}

Result<void> write_npy_i32(const fs::path& path, const std::vector<int64_t>& shape,
                           const std::vector<int32_t>& values) {
  return write_typed(path, "<i4", shape, values);
}

}  // namespace calbin
