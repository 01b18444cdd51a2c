// For runtimes of this project that implement calrt.h and its extensions (the simulator's
// runtime, the service client, the validation layer): the one list of entries in table order, which
// declares each runtime's entry functions and builds its function table and extension chain from
// them, so a new entry is added in one place and no table can list its entries out of order.
//
// Usage, with one function per entry, named in snake case, in the runtime's namespace:
//   namespace my::runtime { CALRT_DECLARE_RUNTIME_ENTRIES() }      // entry_points.hpp
//   namespace { using namespace my::runtime; CALRT_DEFINE_RUNTIME_TABLE(kApi) }
// The vendor-shim skeleton does not use this: it depends on calrt.h alone.
#pragma once

#include "abi/calrt.h"
#include "abi/calrt_ext.h"

// X(return type, function name, table field) for every CalrtApi entry, in table order: the
// three error-object accessors, then every entry that returns a CalrtError*.
#define CALRT_API_ERROR_ENTRIES(X)      \
  X(void, error_destroy, Error_Destroy) \
  X(void, error_message, Error_Message) \
  X(void, error_get_code, Error_GetCode)
#define CALRT_API_FALLIBLE_ENTRIES(X)                              \
  X(CalrtError*, device_create, Device_Create)                     \
  X(CalrtError*, device_destroy, Device_Destroy)                   \
  X(CalrtError*, device_status, Device_Status)                     \
  X(CalrtError*, device_chip_status, Device_ChipStatus)            \
  X(CalrtError*, device_reset, Device_Reset)                       \
  X(CalrtError*, device_set_parallel_mode, Device_SetParallelMode) \
  X(CalrtError*, calbin_create, Calbin_Create)                     \
  X(CalrtError*, calbin_destroy, Calbin_Destroy)                   \
  X(CalrtError*, calbin_get_info, Calbin_GetInfo)                  \
  X(CalrtError*, calbin_get_model, Calbin_GetModel)                \
  X(CalrtError*, calbin_get_tensor, Calbin_GetTensor)              \
  X(CalrtError*, calbin_get_csr, Calbin_GetCsr)                    \
  X(CalrtError*, calbin_configure, Calbin_Configure)               \
  X(CalrtError*, buffer_create, Buffer_Create)                     \
  X(CalrtError*, buffer_destroy, Buffer_Destroy)                   \
  X(CalrtError*, buffer_map, Buffer_Map)                           \
  X(CalrtError*, buffer_unmap, Buffer_Unmap)                       \
  X(CalrtError*, buffer_set_csr, Buffer_SetCsr)                    \
  X(CalrtError*, buffer_get_csr, Buffer_GetCsr)                    \
  X(CalrtError*, job_submit, Job_Submit)                           \
  X(CalrtError*, job_wait, Job_Wait)                               \
  X(CalrtError*, job_status, Job_Status)                           \
  X(CalrtError*, job_cancel, Job_Cancel)                           \
  X(CalrtError*, job_destroy, Job_Destroy)                         \
  X(CalrtError*, kv_allocate, Kv_Allocate)                         \
  X(CalrtError*, kv_apply, Kv_Apply)                               \
  X(CalrtError*, kv_free, Kv_Free)                                 \
  X(CalrtError*, kv_clear, Kv_Clear)                               \
  X(CalrtError*, kv_info, Kv_Info)                                 \
  X(CalrtError*, kv_capacity, Kv_Capacity)
#define CALRT_API_ENTRIES(X) CALRT_API_ERROR_ENTRIES(X) CALRT_API_FALLIBLE_ENTRIES(X)

// The same for the four extensions of calrt_ext.h, each in its struct's field order.
#define CALRT_CLOCK_ENTRIES(X)         \
  X(CalrtError*, clock_get, Clock_Get) \
  X(CalrtError*, clock_host_spend, Clock_HostSpend)
#define CALRT_TRACE_ENTRIES(X)               \
  X(CalrtError*, trace_enable, Trace_Enable) \
  X(CalrtError*, trace_read, Trace_Read)
#define CALRT_FAULT_ENTRIES(X)                  \
  X(CalrtError*, fault_set_plan, Fault_SetPlan) \
  X(CalrtError*, fault_get_hits, Fault_GetHits)
#define CALRT_DIAG_ENTRIES(X)              \
  X(CalrtError*, diag_report, Diag_Report) \
  X(CalrtError*, diag_state_hash, Diag_StateHash)

// All four, in the chain's order.
#define CALRT_EXT_ENTRIES(X) \
  CALRT_CLOCK_ENTRIES(X) CALRT_TRACE_ENTRIES(X) CALRT_FAULT_ENTRIES(X) CALRT_DIAG_ENTRIES(X)

#define CALRT_DECLARE_ENTRY_(ret, fn, field) ret fn(Calrt_##field##_Args* args);
#define CALRT_TABLE_ENTRY_(ret, fn, field) &fn,

// Declares every entry function of the table and of the four extensions.
#define CALRT_DECLARE_RUNTIME_ENTRIES()     \
  CALRT_API_ENTRIES(CALRT_DECLARE_ENTRY_)   \
  CALRT_CLOCK_ENTRIES(CALRT_DECLARE_ENTRY_) \
  CALRT_TRACE_ENTRIES(CALRT_DECLARE_ENTRY_) \
  CALRT_FAULT_ENTRIES(CALRT_DECLARE_ENTRY_) \
  CALRT_DIAG_ENTRIES(CALRT_DECLARE_ENTRY_)

// Defines the table `name` with the extension chain CLOCK -> TRACE -> FAULT -> DIAG, all
// static. The static_assert catches a field added to CalrtApi without an entry in the list.
#define CALRT_DEFINE_RUNTIME_TABLE(name) CALRT_DEFINE_RUNTIME_TABLE_THEN(name, nullptr)
// The same with `tail` (a const CalrtExtensionBase*, or nullptr) after DIAG: extensions only
// some runtimes offer, such as the simulator's CALRT_EXT_PROBE.
#define CALRT_DEFINE_RUNTIME_TABLE_THEN(name, tail)                                              \
  constexpr CalrtDiagExtension name##Diag = {{sizeof(CalrtDiagExtension), CALRT_EXT_DIAG, tail}, \
                                             CALRT_DIAG_ENTRIES(CALRT_TABLE_ENTRY_)};            \
  constexpr CalrtFaultExtension name##Fault = {                                                  \
      {sizeof(CalrtFaultExtension), CALRT_EXT_FAULT, &name##Diag.base},                          \
      CALRT_FAULT_ENTRIES(CALRT_TABLE_ENTRY_)};                                                  \
  constexpr CalrtTraceExtension name##Trace = {                                                  \
      {sizeof(CalrtTraceExtension), CALRT_EXT_TRACE, &name##Fault.base},                         \
      CALRT_TRACE_ENTRIES(CALRT_TABLE_ENTRY_)};                                                  \
  constexpr CalrtClockExtension name##Clock = {                                                  \
      {sizeof(CalrtClockExtension), CALRT_EXT_CLOCK, &name##Trace.base},                         \
      CALRT_CLOCK_ENTRIES(CALRT_TABLE_ENTRY_)};                                                  \
  constexpr CalrtApi name = {                                                                    \
      CALRT_API_STRUCT_SIZE, const_cast<CalrtClockExtension*>(&name##Clock),                     \
      CALRT_ABI_MAJOR,       CALRT_ABI_MINOR,                                                    \
      CALRT_ABI_PATCH,       CALRT_API_ENTRIES(CALRT_TABLE_ENTRY_)};                             \
  static_assert(CALRT_API_STRUCT_SIZE == sizeof(CalrtApi), "CalrtApi grew: extend the list")
