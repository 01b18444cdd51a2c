// `calrt info`: opens a device and prints its status and every chip's status. The commands
// that act on a device and then show its status (`calrt reset`, reset.hpp) run through
// run_device_status.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
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
};

// Returns the process exit code (exit_codes.hpp). Never throws.
int run_info(const InfoOptions& options);

// What a command does to the open device before its status is shown: prints its own line and
// records it in the JSON report; throws calrt::Error on a runtime failure.
using DeviceAction = std::function<void(calrt::Device& device, nlohmann::json& doc)>;

// `calrt COMMAND`: opens the device, runs `act` (none for info), then prints and records the
// status of the device and of every chip; the report's schema is calrt-COMMAND/1. Returns the
// process exit code. Never throws.
int run_device_status(const char* command, const InfoOptions& options, const DeviceAction& act);

}  // namespace runner
