#include "runner/tools/devices.hpp"

#include <spdlog/fmt/fmt.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "runner/core/device/device_select.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/core/report/output_file.hpp"
#include "runner/core/report/report.hpp"

namespace runner {
namespace {

struct Row {
  const char* kind;
  uint32_t index = 0;
  std::optional<calrt::DeviceStatus> status;
  uint64_t dram_bytes = 0;  // summed over chips
  std::string error;        // the device is there but failed to open or answer
};

struct Probe {
  const char* kind;
  uint32_t found = 0;
  std::string stopped;  // why probing stopped: the NOT_FOUND message, or the index cap
};

// Opens kind/index, reads its status, closes it. nullopt: nothing there (NOT_FOUND, or a
// kind the runtime does not offer), with `why`.
std::optional<Row> probe(const calrt::Api& api, DeviceSpec spec, const char* kind, uint32_t index,
                         calrt::Timeout timeout, std::string& why) {
  spec.kind = std::string_view(kind) == "pcie" ? calrt::DeviceKind::pcie : calrt::DeviceKind::sim;
  spec.index = index;
  Row row{.kind = kind, .index = index};
  try {
    // Not open_device(): its hint for a user who typed --device-kind pcie has no place here.
    calrt::Device device = calrt::Device::create(api, spec.kind, index, spec.config, timeout);
    row.status = device.status();
    for (uint32_t c = 0; c < row.status->chip_count && c < CALRT_MAX_CHIPS; ++c) {
      row.dram_bytes += device.chip_status(c).dram_total_bytes;
    }
  } catch (const calrt::Error& error) {
    if (error.code() == CALRT_NOT_FOUND || error.code() == CALRT_INVALID_ARGUMENT ||
        error.code() == CALRT_UNIMPLEMENTED) {
      why =
          fmt::format("index {}: {} ({})", index, calrt::code_name(error.code()), error.message());
      return std::nullopt;
    }
    row.error = error.what();
  }
  return row;
}

nlohmann::json row_json(const Row& row) {
  nlohmann::json doc = {{"kind", row.kind}, {"index", row.index}};
  if (!row.status) {
    doc["error"] = row.error;
    return doc;
  }
  const calrt::DeviceStatus& st = *row.status;
  doc.update({{"name", st.device_name},
              {"state", calrt::to_string(st.state)},
              {"chip_count", st.chip_count},
              {"dram_total_bytes", row.dram_bytes},
              {"abi", fmt::format("{}.{}.{}", st.abi_major, st.abi_minor, st.abi_patch)},
              {"runtime_version", st.runtime_version},
              {"firmware_version", st.firmware_version},
              {"driver_version", st.driver_version}});
  return doc;
}

}  // namespace

int run_devices(const DevicesOptions& options) {
  if (options.json) {
    if (std::string problem = check_output_path("--json", *options.json); !problem.empty()) {
      std::fprintf(stderr, "calrt devices: bad input: %s\n", problem.c_str());
      return kExitUsage;
    }
  }
  try {
    DeviceSpec spec;
    calrt::Api api;
    try {
      spec = parse_device(options.device, "sim", 0, options.device_config);
      api = open_runtime(spec);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "calrt devices: bad input: %s\n", error.what());
      return kExitUsage;
    }
    const calrt::Timeout timeout{std::chrono::milliseconds(options.timeout_ms)};
    std::vector<Row> rows;
    std::vector<Probe> probes;
    for (const char* kind : {"pcie", "sim"}) {
      Probe& p = probes.emplace_back(Probe{.kind = kind});
      const uint32_t limit = std::string_view(kind) == "sim" ? 1 : options.max_index;
      uint32_t index = 0;
      for (; index < limit; ++index) {
        std::string why;
        std::optional<Row> row = probe(api, spec, kind, index, timeout, why);
        if (!row) {
          p.stopped = why;
          break;
        }
        p.found += row->status ? 1 : 0;
        rows.push_back(std::move(*row));
      }
      if (index == limit) {
        p.stopped = std::string_view(kind) == "sim"
                        ? "the simulator makes a device at any index on demand"
                        : fmt::format("--max-index {} reached", limit);
      }
    }

    std::printf("calrt devices: runtime %s\n", describe(spec).c_str());
    std::printf("%-5s %5s  %-16s %-11s %5s %10s  %-7s %-14s %-14s %s\n", "kind", "index", "name",
                "state", "chips", "DRAM GiB", "ABI", "runtime", "firmware", "driver");
    uint64_t opened = 0, broken = 0;
    for (const Row& row : rows) {
      if (!row.status) {
        ++broken;
        std::printf("%-5s %5u  FAIL: %s\n", row.kind, row.index, row.error.c_str());
        continue;
      }
      ++opened;
      const calrt::DeviceStatus& st = *row.status;
      std::printf("%-5s %5u  %-16s %-11s %5u %10.1f  %-7s %-14s %-14s %s\n", row.kind, row.index,
                  st.device_name.c_str(), calrt::to_string(st.state), st.chip_count,
                  static_cast<double>(row.dram_bytes) / (1024.0 * 1024.0 * 1024.0),
                  fmt::format("{}.{}.{}", st.abi_major, st.abi_minor, st.abi_patch).c_str(),
                  st.runtime_version.c_str(), st.firmware_version.c_str(),
                  st.driver_version.c_str());
    }
    for (const Probe& p : probes) {
      std::printf("%s: %u device%s; %s\n", p.kind, p.found, p.found == 1 ? "" : "s",
                  p.stopped.c_str());
    }
    const bool passed = opened > 0 && broken == 0;
    const std::string failure = opened == 0 && broken == 0 ? "no device found" : "";
    if (!failure.empty()) {
      std::fprintf(stderr, "calrt devices: %s on %s\n", failure.c_str(), describe(spec).c_str());
    }
    int exit_code = passed ? kExitPass : kExitFail;
    if (options.json) {
      nlohmann::json doc =
          to_json(Envelope{.schema = "calrt-devices/1",
                           .command = "devices",
                           .result = passed ? Verdict::pass : Verdict::fail,
                           .counts = {.unit = "device", .passed = opened, .failed = broken},
                           .error = failure});
      doc["runtime"] = options.device;
      doc["devices"] = nlohmann::json::array();
      for (const Row& row : rows) doc["devices"].push_back(row_json(row));
      doc["probes"] = nlohmann::json::array();
      for (const Probe& p : probes) {
        doc["probes"].push_back({{"kind", p.kind}, {"found", p.found}, {"stopped", p.stopped}});
      }
      if (std::string error = write_json_file(*options.json, doc); !error.empty()) {
        std::fprintf(stderr, "calrt devices: %s\n", error.c_str());
        exit_code = exit_code == kExitPass ? kExitUsage : exit_code;
      }
    }
    return exit_code;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "calrt devices: internal error: %s\n", error.what());
    return kExitFail;
  }
}

}  // namespace runner
