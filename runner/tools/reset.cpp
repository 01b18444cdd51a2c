#include "runner/tools/reset.hpp"

#include <chrono>
#include <cstdio>

namespace runner {

const char* reset_level_name(calrt::ResetLevel level) {
  switch (level) {
    case calrt::ResetLevel::job_abort:
      return "job-abort";
    case calrt::ResetLevel::cores:
      return "cores";
    case calrt::ResetLevel::chip:
      return "chip";
    case calrt::ResetLevel::full:
      return "full";
  }
  return "?";
}

int run_reset(const ResetOptions& options) {
  return run_device_status(
      "reset", options.device, [&](calrt::Device& device, nlohmann::json& doc) {
        const calrt::DeviceState state =
            device.reset(options.level, std::chrono::milliseconds(options.device.timeout_ms));
        std::printf("reset %s: device %s\n", reset_level_name(options.level),
                    calrt::to_string(state));
        doc["reset"] = {{"level", reset_level_name(options.level)},
                        {"state", calrt::to_string(state)}};
      });
}

}  // namespace runner
