#include "simdev/gen/weights/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "calbin/bf16.hpp"

namespace simdev::gen {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A header larger than this is not a model's: the 0.6B model's is about 30 KB.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

// IEEE half to float, subnormals and infinities included.
float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float value = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -value : value;
  }
  const uint32_t bits = exponent == 0x1f ? sign | 0x7f800000u | (mantissa << 13)
                                         : sign | ((exponent + 112) << 23) | (mantissa << 13);
  return std::bit_cast<float>(bits);
}

size_t dtype_size(SafetensorsFile::Dtype dtype) {
  return dtype == SafetensorsFile::Dtype::f32 ? 4 : 2;
}

}  // namespace

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) {
    ::munmap(const_cast<uint8_t*>(map_), size_);
  }
}

calbin::Result<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::open(const fs::path& path) {
  const std::string where = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return calbin::fail(where, "", std::string("cannot open: ") + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return calbin::fail(where, "", "not a regular file");
  }
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ < 8) {
    ::close(fd);
    return calbin::fail(where, "header",
                        "file of " + std::to_string(file->size_) +
                            " bytes: too short for the 8-byte header length");
  }
  void* map = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    return calbin::fail(where, "", std::string("cannot map: ") + std::strerror(errno));
  }
  file->map_ = static_cast<const uint8_t*>(map);

  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file->map_, 8);  // little-endian, as the format and x86 are
  if (header_bytes > kMaxHeaderBytes || header_bytes > file->size_ - 8) {
    return calbin::fail(where, "header",
                        "length " + std::to_string(header_bytes) + " runs past the file's " +
                            std::to_string(file->size_) + " bytes");
  }
  file->data_ = file->map_ + 8 + header_bytes;
  const uint64_t data_bytes = file->size_ - 8 - header_bytes;
  const Json header = Json::parse(file->map_ + 8, file->data_, nullptr, false);
  if (!header.is_object()) {
    return calbin::fail(where, "header", "not a JSON object");
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& item : header.items()) {
    const std::string name = item.key();
    const Json& entry = item.value();
    if (name == "__metadata__") continue;
    const auto bad = [&](const std::string& what) { return calbin::fail(where, name, what); };
    if (!entry.is_object()) return bad("not an object");
    Tensor t;
    const Json dtype = entry.value("dtype", Json());
    if (dtype == "F32") {
      t.dtype = Dtype::f32;
    } else if (dtype == "BF16") {
      t.dtype = Dtype::bf16;
    } else if (dtype == "F16") {
      t.dtype = Dtype::f16;
    } else {
      return bad("dtype " + dtype.dump() + ": read are F32, BF16 and F16");
    }
    const Json shape = entry.value("shape", Json());
    if (!shape.is_array()) return bad("shape " + shape.dump() + ": not a list");
    uint64_t elements = 1;
    for (const Json& dim : shape) {
      if (!dim.is_number_unsigned() || dim.get<uint64_t>() > (uint64_t{1} << 40)) {
        return bad("shape " + shape.dump() + ": a dimension is not a count");
      }
      const uint64_t d = dim;
      if (d != 0 && elements > std::numeric_limits<uint64_t>::max() / 8 / d) {
        return bad("shape " + shape.dump() + ": too many elements");
      }
      elements *= d;
      t.shape.push_back(static_cast<int64_t>(d));
    }
    const Json offsets = entry.value("data_offsets", Json());
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      return bad("data_offsets " + offsets.dump() + ": not [begin, end]");
    }
    t.begin = offsets[0];
    t.end = offsets[1];
    if (t.end < t.begin || t.end > data_bytes) {
      return bad("data_offsets " + offsets.dump() + ": outside the " + std::to_string(data_bytes) +
                 " bytes of data");
    }
    if (t.end - t.begin != elements * dtype_size(t.dtype)) {
      return bad("data_offsets " + offsets.dump() + ": " + std::to_string(t.end - t.begin) +
                 " bytes for " + std::to_string(elements) + " elements of " + dtype.dump());
    }
    ranges.emplace_back(t.begin, t.end);
    file->tensors_.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) {
      return calbin::fail(where, "header",
                          "two tensors share bytes " + std::to_string(ranges[i].first) + ".." +
                              std::to_string(ranges[i - 1].second));
    }
  }
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

calbin::Result<std::vector<float>> SafetensorsFile::read(const std::string& name,
                                                         const std::vector<int64_t>& shape) const {
  const auto at = tensors_.find(name);
  if (at == tensors_.end()) {
    return calbin::fail(path_.string(), name, "no such tensor");
  }
  const Tensor& t = at->second;
  if (t.shape != shape) {
    return calbin::fail(path_.string(), name,
                        "shape " + shape_text(t.shape) + ", the config needs " + shape_text(shape));
  }
  const size_t count = (t.end - t.begin) / dtype_size(t.dtype);
  std::vector<float> values(count);
  const uint8_t* bytes = data_ + t.begin;
  for (size_t i = 0; i < count; ++i) {
    if (t.dtype == Dtype::f32) {
      std::memcpy(&values[i], bytes + 4 * i, 4);
    } else {
      uint16_t half = 0;
      std::memcpy(&half, bytes + 2 * i, 2);
      values[i] = t.dtype == Dtype::bf16 ? calbin::bf16_to_f32(half) : f16_to_f32(half);
    }
    if (!std::isfinite(values[i])) {
      return calbin::fail(path_.string(), name,
                          "element " + std::to_string(i) + " is " + std::to_string(values[i]));
    }
  }
  return values;
}

calbin::Result<SafetensorsDir> SafetensorsDir::open(const fs::path& dir) {
  SafetensorsDir out;
  std::error_code error;
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  std::vector<fs::path> paths;
  std::map<std::string, std::string> weight_map;  // from the index
  if (fs::is_regular_file(index, error)) {
    std::ifstream stream(index);
    const Json doc = Json::parse(stream, nullptr, false);
    if (!doc.is_object() || !doc.value("weight_map", Json()).is_object()) {
      return calbin::fail(index.string(), "weight_map", "missing or not an object");
    }
    for (const auto& [name, file] : doc["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos ||
          file.get<std::string>().empty() || file.get<std::string>()[0] == '.') {
        return calbin::fail(index.string(), "weight_map." + name,
                            file.dump() + ": not a file name in " + dir.string());
      }
      weight_map[name] = file;
      if (std::find(paths.begin(), paths.end(), dir / file.get<std::string>()) == paths.end()) {
        paths.push_back(dir / file.get<std::string>());
      }
    }
  } else if (fs::is_regular_file(single, error)) {
    paths.push_back(single);
  } else {
    return calbin::fail(dir.string(), "",
                        "neither model.safetensors nor model.safetensors.index.json is there");
  }
  for (const fs::path& path : paths) {
    auto file = SafetensorsFile::open(path);
    if (!file) return tl::unexpected(file.error());
    for (const auto& [name, tensor] : (*file)->tensors()) {
      const auto [at, inserted] = out.file_of_.emplace(name, file->get());
      if (!inserted) {
        return calbin::fail(path.string(), name, "also in " + at->second->path().string());
      }
    }
    out.files_.push_back(std::move(*file));
  }
  for (const auto& [name, file] : weight_map) {
    const auto at = out.file_of_.find(name);
    if (at == out.file_of_.end() || at->second->path().filename() != file) {
      return calbin::fail(index.string(), "weight_map." + name, "not in " + file);
    }
  }
  return out;
}

calbin::Result<void> SafetensorsDir::check(const std::string& name,
                                           const std::vector<int64_t>& shape) const {
  const auto at = file_of_.find(name);
  if (at == file_of_.end()) {
    return calbin::fail("", name, "no such tensor in the weights");
  }
  const SafetensorsFile::Tensor& t = at->second->tensors().at(name);
  if (t.shape != shape) {
    return calbin::fail(at->second->path().string(), name,
                        "shape " + shape_text(t.shape) + ", the config needs " + shape_text(shape));
  }
  return {};
}

calbin::Result<std::vector<float>> SafetensorsDir::read(const std::string& name,
                                                        const std::vector<int64_t>& shape) const {
  const auto at = file_of_.find(name);
  if (at == file_of_.end()) {
    return calbin::fail("", name, "no such tensor in the weights");
  }
  return at->second->read(name, shape);
}

}  // namespace simdev::gen
