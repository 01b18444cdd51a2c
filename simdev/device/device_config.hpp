// The simulated device's parameters, declared as data: each has a name (the config key),
// a unit, a default, a provenance tag and a description, so the parser, `--help` style
// listings and the docs all come from one table.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "simdev/device/status.hpp"

namespace simdev {

enum class ParamTag { kMeasured, kSpec, kAssumed };
std::string_view to_string(ParamTag tag);

struct DeviceConfig {
  uint64_t seed = 1;
  uint64_t chips = 2;
  uint64_t dram_mib = 16384;
  uint64_t peak_int8_gops = 256000;
  uint64_t peak_bf16_gops = 128000;
  uint64_t dram_bw_mbps = 400000;
  uint64_t pcie_bw_mbps = 25000;
  uint64_t pcie_latency_ns = 2000;
  uint64_t d2d_bw_mbps = 100000;
  uint64_t d2d_latency_ns = 500;
  uint64_t op_overhead_ns = 1000;
  uint64_t submit_overhead_ns = 20000;
  uint64_t default_timeout_ms = 30000;

  uint64_t dram_usable_bytes() const { return dram_mib << 20; }
};

struct ParamSpec {
  std::string_view name;
  std::string_view unit;
  uint64_t default_value;
  uint64_t min_value;  // inclusive bounds: a value outside is a config error
  uint64_t max_value;
  ParamTag tag;
  std::string_view description;
  uint64_t DeviceConfig::*field;
};

std::span<const ParamSpec> device_params();

// Parses `key=value;key=value` (whitespace around tokens ignored, empty items skipped).
// An unknown key, a malformed or out-of-range value is INVALID_ARGUMENT naming both.
Expected<DeviceConfig> parse_device_config(std::string_view text);

// One line per parameter: "name=value unit (tag): description"; printed at device start.
std::string describe(const DeviceConfig& config);

}  // namespace simdev
