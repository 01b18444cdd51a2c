// `calrt devices`: the devices a runtime can open, in the manner of `xrt-smi examine` and
// `hailortcli scan`. The ABI has no enumeration call, so the list is probed: Device_Create
// on each kind at index 0, 1, ... until the runtime answers NOT_FOUND (or --max-index),
// each device's status read and the device closed again. The simulator makes a device at
// any index on demand, so its kind is probed at index 0 only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace runner {

struct DevicesOptions {
  std::string device = "sim";  // the runtime: sim, a library path, unix:/tcp:
  std::string device_config;
  uint32_t max_index = 16;  // PCIe indices probed at most
  uint32_t timeout_ms = 30000;
  std::optional<std::filesystem::path> json;
};

// Exit 0 when at least one device opened and no probe failed otherwise than NOT_FOUND; 1
// when none was found or a device failed to open or answer; 2 bad input. Never throws.
int run_devices(const DevicesOptions& options);

}  // namespace runner
