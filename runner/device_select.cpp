#include "runner/device_select.hpp"

#include <stdexcept>

#include "abi/calrt_loader.hpp"

#if CALRT_HAVE_SIM_INPROCESS
#include "simdev/runtime/sim_api.h"
#endif

namespace runner {

DeviceSpec parse_device(const std::string& text, const std::string& kind, uint32_t index,
                        std::string config) {
  if (text.empty()) {
    throw std::invalid_argument(
        "--device: empty value (use sim, a runtime library path, "
        "or unix:SOCKET)");
  }
  if (kind != "sim" && kind != "pcie") {
    throw std::invalid_argument("--device-kind: '" + kind + "' is neither sim nor pcie");
  }
  DeviceSpec spec;
  spec.kind = kind == "pcie" ? calrt::DeviceKind::pcie : calrt::DeviceKind::sim;
  spec.index = index;
  spec.config = std::move(config);
  if (text == "sim") {
    spec.backend = DeviceSpec::Backend::in_process;
  } else if (text.rfind("unix:", 0) == 0) {
    spec.backend = DeviceSpec::Backend::service;
    spec.target = text.substr(5);
  } else {
    spec.backend = DeviceSpec::Backend::library;
    spec.target = text;
  }
  return spec;
}

const char* to_string(DeviceSpec::Backend backend) {
  switch (backend) {
    case DeviceSpec::Backend::in_process:
      return "in-process";
    case DeviceSpec::Backend::library:
      return "library";
    case DeviceSpec::Backend::service:
      return "service";
  }
  return "?";
}

std::string describe(const DeviceSpec& spec) {
  switch (spec.backend) {
    case DeviceSpec::Backend::in_process:
      return "sim (in-process)";
    case DeviceSpec::Backend::library:
      return spec.target + " (library)";
    case DeviceSpec::Backend::service:
      return "unix:" + spec.target + " (service)";
  }
  return "?";
}

bool in_process_simulator_available() { return CALRT_HAVE_SIM_INPROCESS != 0; }

calrt::Api open_runtime(const DeviceSpec& spec) {
  switch (spec.backend) {
    case DeviceSpec::Backend::in_process: {
#if CALRT_HAVE_SIM_INPROCESS
      const CalrtApi* table = calrt_sim_get_api(CALRT_ABI_MAJOR);
      calrt::validate_table(table, CALRT_ABI_MAJOR, "sim (in-process)");
      return calrt::Api(table);
#else
      throw calrt::Error(CALRT_UNIMPLEMENTED, "open_runtime",
                         "this calrt was built without the in-process simulator; pass "
                         "--device PATH/libcalrt_sim.so");
#endif
    }
    case DeviceSpec::Backend::library:
      return calrt::load_runtime(spec.target);
    case DeviceSpec::Backend::service:
      // The seam for `simdev serve`: a client Api over the socket goes here.
      throw calrt::Error(CALRT_UNIMPLEMENTED, "open_runtime",
                         "the service backend (unix:" + spec.target + ") is not built yet");
  }
  throw std::logic_error("open_runtime: unknown backend");
}

calrt::Device open_device(const calrt::Api& api, const DeviceSpec& spec, calrt::Timeout timeout) {
  return calrt::Device::create(api, spec.kind, spec.index, spec.config, timeout);
}

}  // namespace runner
