// For runtimes of this project that implement calrt.h and its extensions (the simulator's
// runtime, the service client, the validation layer): declares each runtime's entry functions
// and builds its function table and extension chain from the call table (call_table.hpp), so a
// new entry is added in one place and no table can list its entries out of order.
//
// Usage, with one function per entry, named in snake case, in the runtime's namespace:
//   namespace my::runtime { CALRT_DECLARE_RUNTIME_ENTRIES() }      // entry_points.hpp
//   namespace { using namespace my::runtime; CALRT_DEFINE_RUNTIME_TABLE(kApi) }
// The vendor-shim skeleton does not use this: it depends on calrt.h alone.
#pragma once

#include "abi/call_table.hpp"

#define CALRT_DECLARE_ERROR_ENTRY_(Group, Verb, fn) void fn(Calrt_##Group##_##Verb##_Args* args);
#define CALRT_DECLARE_ENTRY_(Group, Verb, fn) CalrtError* fn(Calrt_##Group##_##Verb##_Args* args);
#define CALRT_TABLE_ENTRY_(Group, Verb, fn) &fn,

// Declares every entry function of the table and of the four extensions.
#define CALRT_DECLARE_RUNTIME_ENTRIES()         \
  CALRT_ERROR_CALLS(CALRT_DECLARE_ERROR_ENTRY_) \
  CALRT_CORE_CALLS(CALRT_DECLARE_ENTRY_)        \
  CALRT_EXT_CALLS(CALRT_DECLARE_ENTRY_)

// Defines the table `name` with the extension chain CLOCK -> TRACE -> FAULT -> DIAG, all
// static. The static_assert catches a field added to CalrtApi without an entry in the list.
#define CALRT_DEFINE_RUNTIME_TABLE(name) CALRT_DEFINE_RUNTIME_TABLE_THEN(name, nullptr)
// The same with `tail` (a const CalrtExtensionBase*, or nullptr) after DIAG: extensions only
// some runtimes offer, such as the simulator's CALRT_EXT_PROBE.
#define CALRT_DEFINE_RUNTIME_TABLE_THEN(name, tail)                                              \
  constexpr CalrtDiagExtension name##Diag = {{sizeof(CalrtDiagExtension), CALRT_EXT_DIAG, tail}, \
                                             CALRT_DIAG_CALLS(CALRT_TABLE_ENTRY_)};              \
  constexpr CalrtFaultExtension name##Fault = {                                                  \
      {sizeof(CalrtFaultExtension), CALRT_EXT_FAULT, &name##Diag.base},                          \
      CALRT_FAULT_CALLS(CALRT_TABLE_ENTRY_)};                                                    \
  constexpr CalrtTraceExtension name##Trace = {                                                  \
      {sizeof(CalrtTraceExtension), CALRT_EXT_TRACE, &name##Fault.base},                         \
      CALRT_TRACE_CALLS(CALRT_TABLE_ENTRY_)};                                                    \
  constexpr CalrtClockExtension name##Clock = {                                                  \
      {sizeof(CalrtClockExtension), CALRT_EXT_CLOCK, &name##Trace.base},                         \
      CALRT_CLOCK_CALLS(CALRT_TABLE_ENTRY_)};                                                    \
  constexpr CalrtApi name = {                                                                    \
      CALRT_API_STRUCT_SIZE,                                                                     \
      const_cast<CalrtClockExtension*>(&name##Clock),                                            \
      CALRT_ABI_MAJOR,                                                                           \
      CALRT_ABI_MINOR,                                                                           \
      CALRT_ABI_PATCH,                                                                           \
      CALRT_ERROR_CALLS(CALRT_TABLE_ENTRY_) CALRT_CORE_CALLS(CALRT_TABLE_ENTRY_)};               \
  static_assert(CALRT_API_STRUCT_SIZE == sizeof(CalrtApi), "CalrtApi grew: extend the list")
