// Shared helpers of the calbin tests: a scratch directory and a manifest that sets every
// field to a value other than its default, so a reader that drops a field is caught.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "calbin/manifest.hpp"

namespace calbin::testing {

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::random_device seed;
    path_ = std::filesystem::temp_directory_path() /
            ("calbin_test_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
             std::to_string(seed()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline TensorDesc tensor(std::string name, TensorRole role, std::vector<int64_t> shape, Dtype dtype,
                         Layout layout, uint64_t address) {
  TensorDesc desc;
  desc.name = std::move(name);
  desc.role = role;
  desc.shape = std::move(shape);
  desc.dtype = dtype;
  desc.layout = layout;
  desc.bytes = tensor_bytes(desc.shape, dtype, layout).value();
  desc.address = address;
  desc.chip_mask = 3;
  desc.reservation = "io";
  return desc;
}

Manifest sample_manifest();

}  // namespace calbin::testing
