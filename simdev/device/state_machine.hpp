// The device's and the jobs' state machines, written down once (STATE_MACHINE.md explains
// them; a test compares its tables with these). The device consults call_verdict() at the
// top of every call that reaches it, and job_transition_allowed() whenever a job changes
// state, so that what the device does and what the documents say cannot drift apart.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "abi/calrt.h"

namespace simdev {

// Every ABI entry that reaches a device (Device_Create and Device_Destroy act on the
// registry of devices, not on one device's state, and are always allowed).
enum class DeviceCall : uint8_t {
  kDeviceStatus,
  kDeviceChipStatus,
  kDeviceReset,
  kDeviceSetParallelMode,
  kCalbinCreate,
  kCalbinDestroy,
  kCalbinGetInfo,
  kCalbinGetModel,
  kCalbinGetTensor,
  kCalbinGetCsr,
  kCalbinConfigure,
  kBufferCreate,
  kBufferDestroy,
  kBufferMap,
  kBufferUnmap,
  kBufferSetCsr,
  kBufferGetCsr,
  kJobSubmit,
  kJobWait,
  kJobStatus,
  kJobCancel,
  kJobDestroy,
  kKvAllocate,
  kKvApply,
  kKvFree,
  kKvClear,
  kKvInfo,
  kKvCapacity,
  kClockGet,
  kClockHostSpend,
  kTraceEnable,
  kTraceRead,
  kFaultSetPlan,
  kFaultGetHits,
  kDiagReport,
  kDiagStateHash,
};
inline constexpr size_t kDeviceCallCount = 36;

// The ABI name of the call: "Job_Submit", "Clock_HostSpend", ...
const char* call_name(DeviceCall call);

// What a device in some state answers to a call, before it looks at the call's arguments.
enum class CallVerdict : uint8_t {
  kAllowed,
  kWrongState,  // CALRT_WRONG_STATE: allowed again once the device leaves the state
  kDeviceLost,  // CALRT_DEVICE_LOST: never allowed again on this device
};

// The device states in the order of the table's columns.
inline constexpr std::array<CalrtDeviceState, 6> kDeviceStates = {
    CALRT_DEVICE_OPEN,    CALRT_DEVICE_CONFIGURED, CALRT_DEVICE_RUNNING,
    CALRT_DEVICE_FAULTED, CALRT_DEVICE_RESETTING,  CALRT_DEVICE_LOST_STATE};

CallVerdict call_verdict(DeviceCall call, CalrtDeviceState state);
// The code a refusal returns: WRONG_STATE or DEVICE_LOST (OK for kAllowed).
CalrtCode verdict_code(CallVerdict verdict);

// "OPEN", "CONFIGURED", ..., "LOST"; "?" for a value outside the enumeration.
const char* device_state_name(CalrtDeviceState state);

// The reset level that clears a device fault, by CalrtResetLevel value: "none" (0, healthy),
// "job_abort", "cores", "chip", "full"; "?" beyond.
const char* reset_level_name(uint32_t level);

// The job states in declaration order (the transition table's rows and columns).
inline constexpr std::array<CalrtJobState, 6> kJobStates = {
    CALRT_JOB_SUBMITTED, CALRT_JOB_RUNNING,   CALRT_JOB_COMPLETED,
    CALRT_JOB_FAILED,    CALRT_JOB_CANCELLED, CALRT_JOB_TIMED_OUT};

// "SUBMITTED", ..., "TIMED_OUT"; "?" for a value outside the enumeration.
const char* job_state_name(CalrtJobState state);
// Whether a job in `from` may move to `to`; a final state moves nowhere.
bool job_transition_allowed(CalrtJobState from, CalrtJobState to);
// Moves `state` to `to` when the table allows it; otherwise leaves `state` as it is, adds one
// to `violations` and returns false. A device bug thus shows up as a count, not a crash.
bool move_job_state(CalrtJobState& state, CalrtJobState to, uint64_t& violations);

}  // namespace simdev
