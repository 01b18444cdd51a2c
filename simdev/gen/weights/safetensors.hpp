// Hugging Face safetensors, read for `simdev gen --weights DIR`: `DIR/model.safetensors`, or
// shards listed by `DIR/model.safetensors.index.json` (its `weight_map`). A file is 8 bytes
// of little-endian header length N, N bytes of JSON ({name: {dtype, shape, data_offsets}},
// and an optional "__metadata__"), then the tensors' bytes, offsets relative to the end of
// the header.
//
// Every file is memory-mapped read-only, and a header is checked before any tensor is
// trusted: its length against the file, every dtype (F32, BF16, F16 read; others refused by
// name), every shape's element count against its byte range (overflow-checked), every range
// inside the data and no two ranges overlapping. Errors name the file, the tensor and the
// value: the inputs are whatever a user downloaded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "calbin/result.hpp"

namespace simdev::gen {

class SafetensorsFile;

class SafetensorsDir {
 public:
  static calbin::Result<SafetensorsDir> open(const std::filesystem::path& dir);

  bool contains(const std::string& name) const { return file_of_.count(name) > 0; }
  // Present with this shape, or why not; nothing is read.
  calbin::Result<void> check(const std::string& name, const std::vector<int64_t>& shape) const;
  // The tensor as FP32, row-major; its shape must be `shape`.
  calbin::Result<std::vector<float>> read(const std::string& name,
                                          const std::vector<int64_t>& shape) const;
  size_t size() const { return file_of_.size(); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, file] : file_of_) out.push_back(name);
    return out;
  }

 private:
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> file_of_;
};

// One file, mapped and its header checked; for tests and for SafetensorsDir.
class SafetensorsFile {
 public:
  enum class Dtype { f32, bf16, f16 };
  struct Tensor {
    Dtype dtype = Dtype::f32;
    std::vector<int64_t> shape;
    uint64_t begin = 0;  // from the start of the data
    uint64_t end = 0;
  };

  static calbin::Result<std::shared_ptr<const SafetensorsFile>> open(
      const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  calbin::Result<std::vector<float>> read(const std::string& name,
                                          const std::vector<int64_t>& shape) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  const uint8_t* data_ = nullptr;  // after the header
  std::map<std::string, Tensor> tensors_;
};

}  // namespace simdev::gen
