// command_line.hpp: what every `calrt` subcommand shares on the command line. Each
// subcommand folder has a `*_cli.cpp` that creates its subcommand, declares its options on it
// (as HailoRT's CLI and XRT's xbutil2 do, one command per class) and returns a Command;
// main.cpp only registers them. Part of the calrt executable, not of the runner library:
// only the command line needs CLI11.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "cli/command.hpp"

namespace runner {

using calrt::cli::Command;

// The footer of the commands that talk to a device.
inline constexpr const char* kDeviceExitCodes =
    "Exit codes: 0 every step passed; 1 a step failed (device or runtime error, job failure "
    "or timeout, a check or metric below its threshold); 2 usage or bad input found on the "
    "host before any device step (options, a missing or malformed calbin or golden set, a "
    "file with a wrong size or hash, a runtime library that cannot be loaded).";

struct DeviceFlags {
  std::string* device;
  std::string* kind;
  uint32_t* index;
  std::string* config;
};

// A floating-point option in [lo, hi]. NaN and the infinities are refused: CLI11's Range lets
// NaN through, and a NaN threshold or size would turn every later comparison or cast into
// a wrong verdict.
CLI::Validator finite_range(double lo, double hi);

// A report or trace path: a file, a special file or `-` (stdout), never empty. Without this
// an empty value read as "no report" and was silently ignored.
CLI::Validator output_path();

// --device, --device-kind, --device-index, --device-config and --record.
void add_device_options(CLI::App& app, const DeviceFlags& flags);

}  // namespace runner
