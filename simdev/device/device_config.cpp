#include "simdev/device/device_config.hpp"

#include <array>
#include <charconv>
#include <limits>

namespace simdev {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

// Defaults describe one Calculet card as far as the reference tells; the rest are
// assumptions chosen to give plausible orders of magnitude, tagged as such.
constexpr std::array kParams = {
    ParamSpec{"seed", "", 1, 0, kMax, ParamTag::kAssumed,
              "master seed; every random stream is derived from it", &DeviceConfig::seed},
    ParamSpec{"chips", "chips", 2, 1, 8, ParamTag::kSpec, "chiplets on the card",
              &DeviceConfig::chips},
    ParamSpec{"dram_mib", "MiB", 16384, 1, uint64_t{1} << 30, ParamTag::kAssumed,
              "usable DRAM per chip", &DeviceConfig::dram_mib},
    ParamSpec{"peak_int8_gops", "Gop/s", 256000, 1, kMax / 2, ParamTag::kAssumed,
              "peak INT8 throughput per chip", &DeviceConfig::peak_int8_gops},
    ParamSpec{"peak_bf16_gops", "Gop/s", 128000, 1, kMax / 2, ParamTag::kAssumed,
              "peak BF16 throughput per chip", &DeviceConfig::peak_bf16_gops},
    ParamSpec{"dram_bw_mbps", "MB/s", 400000, 1, kMax / 2, ParamTag::kAssumed,
              "DRAM bandwidth per chip", &DeviceConfig::dram_bw_mbps},
    ParamSpec{"pcie_bw_mbps", "MB/s", 25000, 1, kMax / 2, ParamTag::kAssumed,
              "host link bandwidth (PCIe Gen4 x16, effective)", &DeviceConfig::pcie_bw_mbps},
    ParamSpec{"pcie_latency_ns", "ns", 2000, 0, kMax / 2000, ParamTag::kAssumed,
              "host link latency per transfer", &DeviceConfig::pcie_latency_ns},
    ParamSpec{"d2d_bw_mbps", "MB/s", 100000, 1, kMax / 2, ParamTag::kAssumed,
              "die-to-die link bandwidth", &DeviceConfig::d2d_bw_mbps},
    ParamSpec{"d2d_latency_ns", "ns", 500, 0, kMax / 2000, ParamTag::kAssumed,
              "die-to-die latency per transfer", &DeviceConfig::d2d_latency_ns},
    ParamSpec{"op_overhead_ns", "ns", 1000, 0, kMax / 2000, ParamTag::kAssumed,
              "fixed cost of launching one op", &DeviceConfig::op_overhead_ns},
    ParamSpec{"submit_overhead_ns", "ns", 20000, 0, kMax / 2000, ParamTag::kAssumed,
              "fixed cost of one job submission", &DeviceConfig::submit_overhead_ns},
    ParamSpec{"default_timeout_ms", "ms", 30000, 1, uint64_t{1} << 40, ParamTag::kAssumed,
              "device time a call with CALRT_TIMEOUT_DEFAULT may take",
              &DeviceConfig::default_timeout_ms},
};

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  return text;
}

const ParamSpec* find_param(std::string_view name) {
  for (const ParamSpec& spec : kParams) {
    if (spec.name == name) {
      return &spec;
    }
  }
  return nullptr;
}

Status apply_item(std::string_view item, DeviceConfig& config) {
  const size_t eq = item.find('=');
  const std::string_view key = trim(item.substr(0, eq));
  const std::string_view value = eq == std::string_view::npos ? "" : trim(item.substr(eq + 1));
  const std::string quoted = "device config \"" + std::string(key) + "=" + std::string(value);
  if (key == "config") {
    return fail(CALRT_INVALID_ARGUMENT,
                quoted + "\": device config files are not supported by this simulator yet");
  }
  const ParamSpec* spec = find_param(key);
  if (spec == nullptr) {
    std::string known;
    for (const ParamSpec& s : kParams) {
      known += (known.empty() ? "" : ", ") + std::string(s.name);
    }
    return fail(CALRT_INVALID_ARGUMENT, quoted + "\": unknown key; keys: " + known);
  }
  uint64_t parsed = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (eq == std::string_view::npos || value.empty() || ec != std::errc() ||
      end != value.data() + value.size()) {
    return fail(CALRT_INVALID_ARGUMENT, quoted + "\": value is not an unsigned integer");
  }
  if (parsed < spec->min_value || parsed > spec->max_value) {
    return fail(CALRT_INVALID_ARGUMENT, quoted + "\": value outside [" +
                                            std::to_string(spec->min_value) + ", " +
                                            std::to_string(spec->max_value) + "]");
  }
  config.*(spec->field) = parsed;
  return {};
}

}  // namespace

std::string_view to_string(ParamTag tag) {
  switch (tag) {
    case ParamTag::kMeasured:
      return "measured";
    case ParamTag::kSpec:
      return "spec";
    case ParamTag::kAssumed:
      return "assumed";
  }
  return "?";
}

std::span<const ParamSpec> device_params() { return kParams; }

Expected<DeviceConfig> parse_device_config(std::string_view text) {
  DeviceConfig config;
  for (const ParamSpec& spec : kParams) {
    config.*(spec.field) = spec.default_value;
  }
  // Bounded by the text length: every iteration consumes at least one character.
  while (!text.empty()) {
    const size_t semi = text.find(';');
    const std::string_view item = trim(text.substr(0, semi));
    text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
    if (item.empty()) {
      continue;
    }
    if (auto status = apply_item(item, config); !status) {
      return tl::unexpected(status.error());
    }
  }
  return config;
}

std::string describe(const DeviceConfig& config) {
  std::string text;
  for (const ParamSpec& spec : kParams) {
    text += std::string(spec.name) + "=" + std::to_string(config.*(spec.field)) + " " +
            std::string(spec.unit) + " (" + std::string(to_string(spec.tag)) +
            "): " + std::string(spec.description) + "\n";
  }
  return text;
}

}  // namespace simdev
