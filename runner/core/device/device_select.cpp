#include "runner/core/device/device_select.hpp"
#include "simdev/service/endpoint.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "abi/calrt_loader.hpp"
#include "abi/validate/validate_layer.hpp"
#include "cli/nearest.hpp"

#if CALRT_HAVE_SIM_INPROCESS
#include "simdev/runtime/sim_api.h"
#endif
#include "simdev/service/client/client_api.h"

namespace runner {

namespace {
std::string& record_file() {
  static std::string path;
  return path;
}

constexpr std::string_view kValidatePrefix = "validate:";
constexpr std::string_view kDeviceForms =
    "--device takes sim (the simulator in this process), a runtime library's path "
    "(./libcalrt_vendor.so, or a file name the dynamic loader finds, ending in .so), "
    "unix:SOCKET or tcp:HOST:PORT (a simdev serve daemon), or validate:INNER";

// A word that is no path and no shared library is a mistyped form, refused before anything
// is loaded (dlopen would only say "cannot open shared object file").
void refuse_unknown_form(const std::string& text) {
  if (text.find('/') != std::string::npos || text.find(".so") != std::string::npos) return;
  std::string hint;
  for (const std::string_view form : {"sim", "unix:", "tcp:", "validate:"}) {
    if (calrt::cli::edit_distance(text.substr(0, std::min(text.size(), form.size())), form) <= 2) {
      hint =
          std::string("; did you mean ") + std::string(form) + (form.back() == ':' ? "...?" : "?");
      break;
    }
  }
  throw std::invalid_argument("--device '" + text + "': neither a form calrt knows nor a path" +
                              hint + " (" + std::string(kDeviceForms) + ")");
}

// The backend without the layer.
DeviceSpec parse_backend(const std::string& text, const std::string& kind, uint32_t index,
                         std::string config) {
  if (text.empty()) {
    throw std::invalid_argument("--device: empty value (" + std::string(kDeviceForms) + ")");
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
  } else if (text.rfind("unix:", 0) == 0 || text.rfind("tcp:", 0) == 0) {
    // A malformed endpoint is bad input, refused before anything runs (not a device failure).
    if (auto endpoint = simdev::service::parse_endpoint(text); !endpoint) {
      throw std::invalid_argument("--device: " + endpoint.error());
    }
    spec.backend = DeviceSpec::Backend::service;
    spec.target = text;  // the endpoint, as calrt_client_get_api takes it
  } else {
    refuse_unknown_form(text);
    spec.backend = DeviceSpec::Backend::library;
    spec.target = text;
  }
  return spec;
}

}  // namespace

void set_record_file(std::string path) { record_file() = std::move(path); }

DeviceSpec parse_device(const std::string& text, const std::string& kind, uint32_t index,
                        std::string config) {
  const bool prefixed = text.rfind(kValidatePrefix, 0) == 0;
  if (!prefixed && record_file().empty()) {
    return parse_backend(text, kind, index, std::move(config));
  }
  const std::string inner = prefixed ? text.substr(kValidatePrefix.size()) : text;
  if (inner.empty() || inner.rfind(kValidatePrefix, 0) == 0) {
    throw std::invalid_argument("--device: '" + text +
                                "': validate: takes one inner runtime (sim or a library path)");
  }
  DeviceSpec spec = parse_backend(inner, kind, index, std::move(config));
  spec.validate = true;
  spec.record = record_file();
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
  if (spec.validate) {
    DeviceSpec inner = spec;
    inner.validate = false;
    return "validate:" + describe(inner) +
           (spec.record.empty() ? std::string() : ", recording to " + spec.record);
  }
  switch (spec.backend) {
    case DeviceSpec::Backend::in_process:
      return "sim (in-process)";
    case DeviceSpec::Backend::library:
      return spec.target + " (library)";
    case DeviceSpec::Backend::service:
      return spec.target + " (service)";
  }
  return "?";
}

CalrtGetApiFn* runtime_entry_point(const calrt::Api& api, const DeviceSpec& spec) {
  CalrtGetApiFn* fn = nullptr;
  if (spec.backend == DeviceSpec::Backend::in_process) {
#if CALRT_HAVE_SIM_INPROCESS
    fn = &calrt_sim_get_api;
#endif
  } else if (spec.backend == DeviceSpec::Backend::service) {
    fn = &calrt_client_entry_point;
  } else if (spec.backend == DeviceSpec::Backend::library) {
    // The library is loaded already (api keeps it); this only takes another reference,
    // which stays for the process's life like the table it guards.
    if (void* handle = dlopen(spec.target.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      fn = reinterpret_cast<CalrtGetApiFn*>(dlsym(handle, CALRT_GET_API_SYMBOL));
    }
  }
  if (fn != nullptr && fn(CALRT_ABI_MAJOR) != api.table()) return nullptr;
  return fn;
}

bool in_process_simulator_available() { return CALRT_HAVE_SIM_INPROCESS != 0; }

calrt::Api open_runtime(const DeviceSpec& spec) {
  if (spec.validate) {
    // The layer owns the inner Api (and so its library); the returned Api owns the layer.
    DeviceSpec inner_spec = spec;
    inner_spec.validate = false;
    auto inner = std::make_shared<calrt::Api>(open_runtime(inner_spec));
    calrt::validate::Options options;
    options.record_path = spec.record;
    options.inner_name = describe(inner_spec);
    const CalrtApi* inner_table = inner->table();
    std::shared_ptr<calrt::validate::Layer> layer =
        calrt::validate::wrap(inner_table, std::move(options), std::move(inner));
    const CalrtApi* table = layer->api();
    return calrt::Api(table, std::move(layer));
  }
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
      try {
        return calrt::load_runtime(spec.target);
      } catch (const calrt::LoadError& error) {
        if (error.kind() != calrt::LoadErrorKind::open_failed) throw;
        const std::string prefix = "cannot load CalRT runtime " + error.origin() + ": ";
        std::string detail = error.what();
        if (detail.rfind(prefix, 0) == 0) detail.erase(0, prefix.size());
        throw calrt::LoadError(error.kind(), error.origin(),
                               detail + " (" + std::string(kDeviceForms) + ")");
      }
    case DeviceSpec::Backend::service: {
      const CalrtApi* table = calrt_client_get_api(CALRT_ABI_MAJOR, spec.target.c_str());
      calrt::validate_table(table, CALRT_ABI_MAJOR, describe(spec));
      return calrt::Api(table);
    }
  }
  throw std::logic_error("open_runtime: unknown backend");
}

calrt::Device open_device(const calrt::Api& api, const DeviceSpec& spec, calrt::Timeout timeout) {
  try {
    return calrt::Device::create(api, spec.kind, spec.index, spec.config, timeout);
  } catch (const calrt::Error& error) {
    // The runtime can only name the ABI's enum; the user typed a flag.
    if (error.code() == CALRT_NOT_FOUND && spec.kind == calrt::DeviceKind::pcie) {
      throw calrt::Error(error.code(), "Device_Create",
                         error.message() +
                             "; calrt: --device-kind sim selects the simulated "
                             "device, --device PATH another runtime");
    }
    throw;
  }
}

}  // namespace runner
