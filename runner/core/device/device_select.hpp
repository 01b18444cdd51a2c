// Choosing the runtime behind `--device`: the simulator linked into this process, a runtime
// shared library by path (how real hardware is reached, through a vendor shim), or the
// simulator as a service over a socket (`simdev serve`). Every backend ends in the same calrt::Api,
// so nothing after device selection knows which one it talks to.
#pragma once

#include <string>

#include "abi/calrt.hpp"

namespace runner {

struct DeviceSpec {
  enum class Backend { in_process, library, service };
  Backend backend = Backend::in_process;
  std::string target;  // library path or service endpoint (unix:/tcp:); empty for in_process
  calrt::DeviceKind kind = calrt::DeviceKind::sim;
  uint32_t index = 0;
  std::string config;  // passed to Device_Create as is
  // `validate:INNER`: the runtime above wrapped in the validation layer (abi/validate/).
  bool validate = false;
  std::string record;  // the layer's call recording (calrt-calls/1); implies validate
};

// The recording `--record FILE` asks for: parse_device() puts it into every spec it returns
// and wraps that spec's runtime in the validation layer. Empty (the default): no recording.
void set_record_file(std::string path);

// Parses `--device`: "sim" (in process), "unix:SOCKET" or "tcp:HOST:PORT" (service),
// "validate:INNER" (INNER wrapped in the validation layer), anything else is a path to a runtime
// library; `kind` is "sim" or "pcie". Throws std::invalid_argument for an empty device or an
// unknown kind.
DeviceSpec parse_device(const std::string& text, const std::string& kind = "sim",
                        uint32_t index = 0, std::string config = {});
const char* to_string(DeviceSpec::Backend backend);
// "sim (in-process)", "build/.../libcalrt_sim.so", ...
std::string describe(const DeviceSpec& spec);

// Loads the runtime of `spec` and checks its table. Throws calrt::LoadError (naming the
// library) or calrt::Error (UNIMPLEMENTED for a backend this build lacks).
calrt::Api open_runtime(const DeviceSpec& spec);

// The backend's CalrtGetApi, when `api` is the table it returns; nullptr otherwise (a table
// a test built, or a library without an entry point). Conformance asks the entry point
// again for other majors (VER clauses).
CalrtGetApiFn* runtime_entry_point(const calrt::Api& api, const DeviceSpec& spec);

// Opens the device of `spec` through `api` (Device_Create).
calrt::Device open_device(const calrt::Api& api, const DeviceSpec& spec, calrt::Timeout timeout);

// Whether this build links the simulator in process (`--device sim`).
bool in_process_simulator_available();

}  // namespace runner
