#include "runner/core/command_line.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "runner/core/device/device_select.hpp"

namespace runner {

CLI::Validator finite_range(double lo, double hi) {
  const std::string range = fmt::format("[{}, {}]", lo, hi);
  return CLI::Validator(
      [lo, hi, range](const std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size()) {
          return "'" + text + "' is not a number";
        }
        if (!std::isfinite(value) || errno == ERANGE || value < lo || value > hi) {
          return "'" + text + "' is outside " + range + " (finite numbers only)";
        }
        return {};
      },
      "FLOAT in " + range);
}

CLI::Validator output_path() {
  return CLI::Validator(
      [](const std::string& text) -> std::string {
        return text.empty() ? "an empty path (name a file, or - for stdout)" : std::string();
      },
      "PATH");
}

void add_device_options(CLI::App& app, const DeviceFlags& flags) {
  app.add_option("--device", *flags.device,
                 "sim (the simulator in process), a runtime library path (e.g. "
                 "build/simdev/runtime/libcalrt_sim.so), or unix:SOCKET / tcp:HOST:PORT (a "
                 "`simdev serve` daemon)")
      ->capture_default_str();
  app.add_option("--device-kind", *flags.kind, "device kind passed to Device_Create")
      ->check(CLI::IsMember({"sim", "pcie"}))
      ->capture_default_str();
  app.add_option("--device-index", *flags.index, "device index passed to Device_Create")
      ->capture_default_str();
  app.add_option("--device-config", *flags.config,
                 "runtime option string for Device_Create, e.g. \"seed=1;dram_mib=4096\"");
  // The layer is chosen with `--device validate:INNER`; --record implies it.
  app.add_option_function<std::string>(
      "--record", [](const std::string& path) { set_record_file(path); },
      "record every ABI call to FILE (calrt-calls/1, for `calrt replay`) through the "
      "validation layer, as --device validate:INNER does");
}

}  // namespace runner
