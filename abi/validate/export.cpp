// libcalrt_validate.so: the validation layer as a runtime library any host loads unmodified
// (like a Vulkan layer). Configured by the environment, since a host that only knows
// CalrtGetApi has no other way to pass options:
//   CALRT_VALIDATE_RUNTIME  path of the runtime library to wrap (required; without it
//                           CalrtGetApi returns NULL and the loader reports that cleanly)
//   CALRT_VALIDATE_RECORD   write the call recording (calrt-calls/1) to this file
//   CALRT_VALIDATE_MODE     "report" forwards violating calls instead of refusing them
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "abi/calrt.h"
#include "abi/calrt_loader.hpp"
#include "abi/validate/validate_layer.hpp"

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// Built once per process and never destroyed: the table must outlive every host object that
// holds it, including other libraries' static destructors at exit, and the layer's destructor
// logs through spdlog, whose registry may already be gone by then. The library is loaded
// RTLD_NODELETE, so the object stays reachable.
const CalrtApi* layer_table() {
  static std::once_flag once;
  static calrt::validate::Layer* layer = nullptr;
  std::call_once(once, [] {
    const std::string inner_path = env("CALRT_VALIDATE_RUNTIME");
    if (inner_path.empty()) {
      spdlog::error(
          "libcalrt_validate: CALRT_VALIDATE_RUNTIME is not set: it names the runtime library "
          "the layer wraps");
      return;
    }
    try {
      calrt::Api inner = calrt::load_runtime(inner_path);
      calrt::validate::Options options;
      options.record_path = env("CALRT_VALIDATE_RECORD");
      options.refuse = env("CALRT_VALIDATE_MODE") != "report";
      options.inner_name = inner_path;
      const CalrtApi* table = inner.table();
      layer = calrt::validate::wrap(table, std::move(options),
                                    std::make_shared<calrt::Api>(std::move(inner)))
                  .release();
    } catch (const std::exception& error) {
      spdlog::error("libcalrt_validate: {}", error.what());
    }
  });
  return layer != nullptr ? layer->api() : nullptr;
}

}  // namespace

extern "C" CALRT_EXPORT const CalrtApi* CalrtGetApi(uint32_t abi_major) {
  if (abi_major != CALRT_ABI_MAJOR) {
    return nullptr;
  }
  return layer_table();
}
