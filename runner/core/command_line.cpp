#include "runner/core/command_line.hpp"

#include "runner/core/device_select.hpp"

namespace runner {

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
