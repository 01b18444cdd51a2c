// The client's function table, shared by calrt_client_get_api (in process) and the shared
// library's exported CalrtGetApi.
#include "simdev/service/client/client_api.h"
#include "simdev/service/client/client_device.hpp"
#include "simdev/service/client/entry_points.hpp"

namespace {

using namespace simdev::service::client;

constexpr CalrtDiagExtension kDiagExtension = {
    {sizeof(CalrtDiagExtension), CALRT_EXT_DIAG, nullptr},
    &diag_report,
    &diag_state_hash,
};

constexpr CalrtFaultExtension kFaultExtension = {
    {sizeof(CalrtFaultExtension), CALRT_EXT_FAULT, &kDiagExtension.base},
    &fault_set_plan,
    &fault_get_hits,
};

constexpr CalrtTraceExtension kTraceExtension = {
    {sizeof(CalrtTraceExtension), CALRT_EXT_TRACE, &kFaultExtension.base},
    &trace_enable,
    &trace_read,
};

constexpr CalrtClockExtension kClockExtension = {
    {sizeof(CalrtClockExtension), CALRT_EXT_CLOCK, &kTraceExtension.base},
    &clock_get,
    &clock_host_spend,
};

constexpr CalrtApi kApi = {
    CALRT_API_STRUCT_SIZE,
    const_cast<CalrtClockExtension*>(&kClockExtension),
    CALRT_ABI_MAJOR,
    CALRT_ABI_MINOR,
    CALRT_ABI_PATCH,
    &error_destroy,
    &error_message,
    &error_get_code,
    &device_create,
    &device_destroy,
    &device_status,
    &device_chip_status,
    &device_reset,
    &device_set_parallel_mode,
    &calbin_create,
    &calbin_destroy,
    &calbin_get_info,
    &calbin_get_model,
    &calbin_get_tensor,
    &calbin_get_csr,
    &calbin_configure,
    &buffer_create,
    &buffer_destroy,
    &buffer_map,
    &buffer_unmap,
    &buffer_set_csr,
    &buffer_get_csr,
    &job_submit,
    &job_wait,
    &job_status,
    &job_cancel,
    &job_destroy,
    &kv_allocate,
    &kv_apply,
    &kv_free,
    &kv_clear,
    &kv_info,
    &kv_capacity,
};

// A field added to CalrtApi without a slot here would shift every later entry.
static_assert(CALRT_API_STRUCT_SIZE == sizeof(CalrtApi), "CalrtApi grew: extend kApi");

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
