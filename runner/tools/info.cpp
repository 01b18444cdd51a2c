#include "runner/tools/info.hpp"

#include <spdlog/fmt/fmt.h>

#include <chrono>
#include <cstdio>

#include "runner/core/device/device_select.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/core/report/report.hpp"

namespace runner {
namespace {

nlohmann::json status_json(const calrt::DeviceStatus& st) {
  return {{"state", calrt::to_string(st.state)},
          {"device_name", st.device_name},
          {"runtime_version", st.runtime_version},
          {"firmware_version", st.firmware_version},
          {"driver_version", st.driver_version},
          {"abi", fmt::format("{}.{}.{}", st.abi_major, st.abi_minor, st.abi_patch)},
          {"chip_count", st.chip_count},
          {"parallel_mode", st.parallel_mode},
          {"error_count", st.error_count},
          {"reset_count", st.reset_count},
          {"device_time_ns", st.device_time.count()},
          {"last_error", calrt::code_name(st.last_error)}};
}

nlohmann::json chip_json(const calrt::ChipStatus& chip) {
  return {{"chip", chip.chip},
          {"health", calrt::to_string(chip.health)},
          {"dram_total_bytes", chip.dram_total_bytes},
          {"dram_used_bytes", chip.dram_used_bytes},
          {"ecc_corrected", chip.ecc_corrected},
          {"ecc_uncorrected", chip.ecc_uncorrected},
          {"busy_time_ns", chip.busy_time.count()}};
}

// Prints and records the device and its chips; throws calrt::Error on a runtime failure.
void describe_device(const calrt::Device& device, const DeviceSpec& spec, nlohmann::json& doc) {
  const calrt::DeviceStatus st = device.status();
  std::printf("device   %s\n", describe(spec).c_str());
  std::printf("  state %s, name %s, ABI %u.%u.%u, %u chips, parallel mode %s\n",
              calrt::to_string(st.state), st.device_name.c_str(), st.abi_major, st.abi_minor,
              st.abi_patch, st.chip_count, st.parallel_mode ? "on" : "off");
  std::printf("  runtime %s, firmware %s, driver %s\n", st.runtime_version.c_str(),
              st.firmware_version.c_str(), st.driver_version.c_str());
  std::printf("  errors %llu, resets %llu, last error %s, device time %lld ns\n",
              static_cast<unsigned long long>(st.error_count),
              static_cast<unsigned long long>(st.reset_count),
              calrt::code_name(st.last_error).c_str(),
              static_cast<long long>(st.device_time.count()));
  doc["status"] = status_json(st);
  doc["chips"] = nlohmann::json::array();
  for (uint32_t c = 0; c < st.chip_count && c < CALRT_MAX_CHIPS; ++c) {
    const calrt::ChipStatus chip = device.chip_status(c);
    std::printf(
        "chip %u   %s, DRAM %.1f of %.1f MiB used, ECC corrected %llu uncorrected %llu, "
        "busy %lld ns\n",
        c, calrt::to_string(chip.health), mib(chip.dram_used_bytes), mib(chip.dram_total_bytes),
        static_cast<unsigned long long>(chip.ecc_corrected),
        static_cast<unsigned long long>(chip.ecc_uncorrected),
        static_cast<long long>(chip.busy_time.count()));
    doc["chips"].push_back(chip_json(chip));
  }
}

}  // namespace

int run_info(const InfoOptions& options) { return run_device_status("info", options, nullptr); }

int run_device_status(const char* command, const InfoOptions& options, const DeviceAction& act) {
  nlohmann::json doc = {{"device", options.device}};
  int exit_code = kExitPass;
  std::string failure;
  if (options.json) {
    if (std::string problem = check_output_path("--json", *options.json); !problem.empty()) {
      std::fprintf(stderr, "calrt %s: bad input: %s\n", command, problem.c_str());
      return kExitUsage;
    }
  }
  try {
    calrt::Api api;
    DeviceSpec spec;
    try {
      spec = parse_device(options.device, options.device_kind, options.device_index,
                          options.device_config);
      api = open_runtime(spec);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "calrt %s: bad input: %s\n", command, error.what());
      return kExitUsage;
    }
    calrt::Device device = open_device(api, spec, std::chrono::milliseconds(options.timeout_ms));
    if (act) act(device, doc);
    describe_device(device, spec, doc);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "calrt %s: %s\n", command, error.what());
    failure = error.what();
    exit_code = kExitFail;
  }
  if (options.json) {
    // One device was asked about: it passed when every query answered.
    doc.update(to_json(Envelope{.schema = fmt::format("calrt-{}/1", command),
                                .command = command,
                                .result = failure.empty() ? Verdict::pass : Verdict::fail,
                                .counts = {.unit = "device",
                                           .passed = failure.empty() ? 1u : 0u,
                                           .failed = failure.empty() ? 0u : 1u},
                                .error = failure}));
    if (const std::string error = write_json_file(*options.json, doc); !error.empty()) {
      std::fprintf(stderr, "calrt %s: %s\n", command, error.c_str());
      return exit_code == kExitPass ? kExitUsage : exit_code;
    }
  }
  return exit_code;
}

}  // namespace runner
