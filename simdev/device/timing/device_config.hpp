// The simulated device's parameters, declared as data: each has a name (the config key), a
// YAML section, a unit, a default, bounds, a provenance tag and a description, so the
// `key=value` parser, the YAML config file (simdev/config/calculet-default.yaml), describe(),
// to_yaml() and the docs all come from one table. Every default is an assumption until it is
// calibrated on hardware; the tags say which ones rest on a published fact (spec).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "simdev/device/base/numerics_mutant.hpp"
#include "simdev/device/base/status.hpp"

namespace simdev {

enum class ParamTag { kMeasured, kSpec, kAssumed };
std::string_view to_string(ParamTag tag);

// virtual: device time moves only when the host waits (deterministic, the default);
// paced: device time is also tied to wall time, for demos and wall-clock checks.
enum class ClockMode { kVirtual, kPaced };
std::string_view to_string(ClockMode mode);

// The `schema` line every config file carries; a file with another schema is refused.
inline constexpr std::string_view kDeviceConfigSchema = "simdev-device-config/1";

// An exact rate of num / den units per second. Derived rates such as PCIe's 128b/130b
// payload rate are not whole numbers, so they stay fractions and the times computed from
// them are exact integers.
struct Rate {
  uint64_t num = 0;
  uint64_t den = 1;
  uint64_t per_second() const { return den == 0 ? 0 : num / den; }  // rounded down, for display
  // The rate times pct / 100: what a link or unit achieves at an efficiency.
  Rate at_pct(uint64_t pct) const { return Rate{num * pct, den * 100}; }
};

struct DeviceConfig {
  // Simulator settings.
  ClockMode clock = ClockMode::kVirtual;
  uint64_t seed = 1;
  uint64_t default_timeout_ms = 30000;
  uint64_t job_watchdog_ms = 10000;
  bool strict = false;        // a broken internal invariant stops the device (base/invariants.hpp)
  uint64_t host_threads = 0;  // functional compute (base/workers.hpp); 0: the machine's
  NumericsMutant numerics_mutant = NumericsMutant::none;  // test only
  // One chip (every chip of the card is alike).
  uint64_t chips = 2;
  uint64_t compute_cores = 16;
  uint64_t clock_mhz = 2000;
  uint64_t int8_macs_per_cycle_per_core = 4096;
  uint64_t bf16_macs_per_cycle_per_core = 2048;
  uint64_t compute_efficiency_pct = 70;
  uint64_t sram_kib_per_core = 2048;
  uint64_t dram_mib = 16384;
  uint64_t dram_bw_mbps = 400000;
  uint64_t dram_efficiency_pct = 80;
  // The host link.
  uint64_t pcie_gen = 4;
  uint64_t pcie_lanes = 16;
  uint64_t pcie_efficiency_pct = 80;
  uint64_t pcie_latency_ns = 2000;
  // The die-to-die link between the chips.
  uint64_t d2d_bw_mbps = 100000;
  uint64_t d2d_latency_ns = 500;
  // Fixed costs.
  uint64_t op_overhead_ns = 1000;
  uint64_t submit_overhead_ns = 20000;

  uint64_t dram_usable_bytes() const { return dram_mib << 20; }
  uint64_t sram_bytes_per_chip() const { return compute_cores * (sram_kib_per_core << 10); }
  // Peak ops/s of one chip: cores x MACs/cycle/core x 2 ops per MAC x clock.
  Rate peak_int8_ops_per_s() const;
  Rate peak_bf16_ops_per_s() const;
  // DRAM bandwidth of one chip at its peak (MB/s x 1e6).
  Rate dram_bytes_per_s() const;
  // PCIe payload rate of the link before protocol overhead: lanes x GT/s per lane (gen 3: 8,
  // gen 4: 16, gen 5: 32) x 128/130 (line encoding) / 8 bits per byte.
  Rate pcie_link_bytes_per_s() const;
  // What a DMA transfer achieves: the link rate x pcie_efficiency_pct / 100 (TLP headers,
  // flow control, DMA descriptors).
  Rate pcie_bytes_per_s() const;
  Rate d2d_bytes_per_s() const;

  friend bool operator==(const DeviceConfig&, const DeviceConfig&) = default;
};

struct ParamSpec {
  std::string_view section;  // YAML section holding the key; "" for the top level
  std::string_view name;     // the key, the same in `key=value` strings and in YAML
  std::string_view unit;
  uint64_t default_value;  // an enumeration's default is the index of its name in `choices`
  uint64_t min_value;      // inclusive bounds: a value outside is a config error
  uint64_t max_value;
  ParamTag tag;
  std::string_view description;
  std::span<const std::string_view> choices;  // non-empty: the value is one of these names
  uint64_t (*get)(const DeviceConfig&);
  void (*set)(DeviceConfig&, uint64_t);

  bool is_enum() const { return !choices.empty(); }
  // The value as written in configs: the number, or the enumeration's name.
  std::string format(const DeviceConfig& config) const;
};

std::span<const ParamSpec> device_params();
const ParamSpec* find_device_param(std::string_view name);

// Parses `key=value;key=value` (whitespace around tokens ignored, empty items skipped) over
// the defaults. `config=<path>` (at most once, anywhere in the string) loads that YAML file
// first; the other keys then override it. An unknown or repeated key, a malformed or
// out-of-range value, or a bad file is INVALID_ARGUMENT naming the key and the value (and the
// file).
Expected<DeviceConfig> parse_device_config(std::string_view text);

// Reads a YAML config file over the defaults; keys the file leaves out keep their defaults.
// Errors (missing or unreadable file, YAML syntax, wrong schema, unknown, misplaced or
// repeated key, wrong type, out-of-range value) are INVALID_ARGUMENT naming the file, its
// line, the key and the value.
Expected<DeviceConfig> load_device_config_file(const std::filesystem::path& path);

// The same from text already read; `source` names it in errors.
Expected<DeviceConfig> parse_device_config_yaml(std::string_view text, std::string_view source);

// One line per parameter, "name=value unit (tag): description", then the derived rates.
std::string describe(const DeviceConfig& config);

// The config as a YAML file in the format load_device_config_file reads, every parameter
// present with its unit, tag and description in a comment: reports record the exact config
// of a run with it, and simdev/config/calculet-default.yaml is to_yaml(DeviceConfig{}).
std::string to_yaml(const DeviceConfig& config);

// Where a config's values came from, for a config written by a calibration: the keys it
// measured (tagged `measured` instead of their table tag) and comment lines for the header
// (the source reports, the fit's error).
struct YamlProvenance {
  std::vector<std::string_view> measured;
  std::vector<std::string> notes;
};
std::string to_yaml(const DeviceConfig& config, const YamlProvenance& provenance);

}  // namespace simdev
