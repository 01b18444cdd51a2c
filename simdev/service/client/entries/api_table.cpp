// The client's function table, shared by calrt_client_get_api (in process) and the shared
// library's exported CalrtGetApi.
#include "simdev/service/client/client_api.h"
#include "simdev/service/client/entries/entry_points.hpp"
#include "simdev/service/client/objects/client_device.hpp"

namespace {

using namespace simdev::service::client;

CALRT_DEFINE_RUNTIME_TABLE(kApi);

}  // namespace

extern "C" const CalrtApi* calrt_client_get_api(uint32_t abi_major, const char* endpoint) {
  if (abi_major != CALRT_ABI_MAJOR) {
    return nullptr;
  }
  if (endpoint != nullptr) {
    try {
      set_default_endpoint(endpoint);
    } catch (...) {
      return nullptr;  // out of memory: no table rather than an exception across C
    }
  }
  return &kApi;
}

extern "C" const CalrtApi* calrt_client_entry_point(uint32_t abi_major) {
  return calrt_client_get_api(abi_major, nullptr);
}
