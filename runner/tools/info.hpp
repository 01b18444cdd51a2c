// `calrt info`: opens a device and prints its status and every chip's status; `calrt reset`
// resets it at a level first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "abi/calrt.hpp"

namespace runner {

struct InfoOptions {
  std::string device = "sim";
  std::string device_kind = "sim";
  uint32_t device_index = 0;
  std::string device_config;
  uint32_t timeout_ms = 30000;
  std::optional<std::filesystem::path> json;
  // `calrt reset --level L`: Device_Reset at that level before the status is shown (a shared
  // device of `simdev serve` needs the control role for it).
  std::optional<calrt::ResetLevel> reset;
};

// Returns the process exit code (exit_codes.hpp). Never throws.
int run_info(const InfoOptions& options);

// "job-abort", "cores", "chip", "full": the names `calrt reset --level` takes.
const char* reset_level_name(calrt::ResetLevel level);

}  // namespace runner
