// `calrt info`: opens a device and prints its status and every chip's status.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace runner {

struct InfoOptions {
  std::string device = "sim";
  std::string device_kind = "sim";
  uint32_t device_index = 0;
  std::string device_config;
  uint32_t timeout_ms = 30000;
  std::optional<std::filesystem::path> json;
};

// Returns the process exit code (exit_codes.hpp). Never throws.
int run_info(const InfoOptions& options);

}  // namespace runner
