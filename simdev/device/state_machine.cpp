#include "simdev/device/state_machine.hpp"

#include <iterator>

namespace simdev {
namespace {

constexpr auto A = CallVerdict::kAllowed;
constexpr auto W = CallVerdict::kWrongState;
constexpr auto L = CallVerdict::kDeviceLost;

struct CallRow {
  DeviceCall call;
  const char* name;
  std::array<CallVerdict, kDeviceStates.size()> verdicts;  // in kDeviceStates order
};

// FAULTED keeps what observes the device, releases what the host holds and recovers it;
// it refuses what would give the faulted device new work or change the inputs of that work.
// RESETTING (inside Device_Reset, never seen between calls in the simulator) only observes.
// LOST serves Status, ChipStatus and the simulator's own records of what happened (Diag,
// the trace, the fault counters), and lets the host release its handles and mappings.
constexpr std::array<CallRow, kDeviceCallCount> kCallTable = {{
    // Verdicts by column: OPEN, CONFIGURED, RUNNING, FAULTED, RESETTING, LOST.
    {DeviceCall::kDeviceStatus, "Device_Status", {A, A, A, A, A, A}},
    {DeviceCall::kDeviceChipStatus, "Device_ChipStatus", {A, A, A, A, A, A}},
    {DeviceCall::kDeviceReset, "Device_Reset", {A, A, A, A, W, L}},
    {DeviceCall::kDeviceSetParallelMode, "Device_SetParallelMode", {A, A, W, W, W, L}},
    {DeviceCall::kCalbinCreate, "Calbin_Create", {A, A, A, W, W, L}},
    {DeviceCall::kCalbinDestroy, "Calbin_Destroy", {A, A, A, A, W, A}},
    {DeviceCall::kCalbinGetInfo, "Calbin_GetInfo", {A, A, A, A, A, L}},
    {DeviceCall::kCalbinGetModel, "Calbin_GetModel", {A, A, A, A, A, L}},
    {DeviceCall::kCalbinGetTensor, "Calbin_GetTensor", {A, A, A, A, A, L}},
    {DeviceCall::kCalbinGetCsr, "Calbin_GetCsr", {A, A, A, A, A, L}},
    {DeviceCall::kCalbinConfigure, "Calbin_Configure", {A, A, W, W, W, L}},
    {DeviceCall::kBufferCreate, "Buffer_Create", {A, A, A, W, W, L}},
    {DeviceCall::kBufferDestroy, "Buffer_Destroy", {A, A, A, A, W, A}},
    {DeviceCall::kBufferMap, "Buffer_Map", {A, A, A, W, W, L}},
    {DeviceCall::kBufferUnmap, "Buffer_Unmap", {A, A, A, A, W, A}},
    {DeviceCall::kBufferSetCsr, "Buffer_SetCsr", {A, A, A, W, W, L}},
    {DeviceCall::kBufferGetCsr, "Buffer_GetCsr", {A, A, A, A, A, L}},
    {DeviceCall::kJobSubmit, "Job_Submit", {A, A, A, W, W, L}},
    {DeviceCall::kJobWait, "Job_Wait", {A, A, A, A, W, L}},
    {DeviceCall::kJobStatus, "Job_Status", {A, A, A, A, A, A}},
    {DeviceCall::kJobCancel, "Job_Cancel", {A, A, A, A, W, L}},
    {DeviceCall::kJobDestroy, "Job_Destroy", {A, A, A, A, W, A}},
    {DeviceCall::kKvAllocate, "Kv_Allocate", {A, A, A, W, W, L}},
    {DeviceCall::kKvApply, "Kv_Apply", {A, A, A, W, W, L}},
    {DeviceCall::kKvFree, "Kv_Free", {A, A, A, A, W, A}},
    {DeviceCall::kKvClear, "Kv_Clear", {A, A, A, W, W, L}},
    {DeviceCall::kKvInfo, "Kv_Info", {A, A, A, A, A, L}},
    {DeviceCall::kKvCapacity, "Kv_Capacity", {A, A, A, A, A, L}},
    {DeviceCall::kClockGet, "Clock_Get", {A, A, A, A, A, L}},
    {DeviceCall::kClockHostSpend, "Clock_HostSpend", {A, A, A, A, W, L}},
    {DeviceCall::kTraceEnable, "Trace_Enable", {A, A, A, A, W, L}},
    {DeviceCall::kTraceRead, "Trace_Read", {A, A, A, A, A, A}},
    {DeviceCall::kFaultSetPlan, "Fault_SetPlan", {A, A, A, A, W, L}},
    {DeviceCall::kFaultGetHits, "Fault_GetHits", {A, A, A, A, A, A}},
    {DeviceCall::kDiagReport, "Diag_Report", {A, A, A, A, A, A}},
    {DeviceCall::kDiagStateHash, "Diag_StateHash", {A, A, A, A, A, A}},
}};

constexpr bool rows_follow_the_enum() {
  for (size_t i = 0; i < kCallTable.size(); ++i) {
    if (static_cast<size_t>(kCallTable[i].call) != i) {
      return false;
    }
  }
  return true;
}
static_assert(rows_follow_the_enum(), "kCallTable rows must be in DeviceCall order");

// Column index of a state in the table; kDeviceStates.size() when it has none.
size_t state_column(CalrtDeviceState state) {
  for (size_t i = 0; i < kDeviceStates.size(); ++i) {
    if (kDeviceStates[i] == state) {
      return i;
    }
  }
  return kDeviceStates.size();
}

size_t job_index(CalrtJobState state) {
  for (size_t i = 0; i < kJobStates.size(); ++i) {
    if (kJobStates[i] == state) {
      return i;
    }
  }
  return kJobStates.size();
}

// kJobTransitions[from][to], in kJobStates order.
constexpr bool Y = true;
constexpr bool N = false;
constexpr std::array<std::array<bool, kJobStates.size()>, kJobStates.size()> kJobTransitions = {{
    //  SUB RUN COMPL FAIL CANC TIMED_OUT
    {N, Y, N, Y, Y, N},  // SUBMITTED: starts, or fails/is cancelled before it starts
    {N, N, Y, Y, Y, Y},  // RUNNING: ends one of four ways; TIMED_OUT is the watchdog's
    {N, N, N, N, N, N},  // COMPLETED
    {N, N, N, N, N, N},  // FAILED
    {N, N, N, N, N, N},  // CANCELLED
    {N, N, N, N, N, N},  // TIMED_OUT
}};

}  // namespace

const char* call_name(DeviceCall call) {
  const auto index = static_cast<size_t>(call);
  return index < kCallTable.size() ? kCallTable[index].name : "?";
}

CallVerdict call_verdict(DeviceCall call, CalrtDeviceState state) {
  const auto index = static_cast<size_t>(call);
  const size_t column = state_column(state);
  if (index >= kCallTable.size() || column >= kDeviceStates.size()) {
    return CallVerdict::kWrongState;  // no row or column: refuse rather than guess
  }
  return kCallTable[index].verdicts[column];
}

CalrtCode verdict_code(CallVerdict verdict) {
  switch (verdict) {
    case CallVerdict::kAllowed:
      return CALRT_OK;
    case CallVerdict::kWrongState:
      return CALRT_WRONG_STATE;
    case CallVerdict::kDeviceLost:
      return CALRT_DEVICE_LOST;
  }
  return CALRT_WRONG_STATE;
}

const char* device_state_name(CalrtDeviceState state) {
  switch (state) {
    case CALRT_DEVICE_OPEN:
      return "OPEN";
    case CALRT_DEVICE_CONFIGURED:
      return "CONFIGURED";
    case CALRT_DEVICE_RUNNING:
      return "RUNNING";
    case CALRT_DEVICE_FAULTED:
      return "FAULTED";
    case CALRT_DEVICE_RESETTING:
      return "RESETTING";
    case CALRT_DEVICE_LOST_STATE:
      return "LOST";
    default:
      return "?";
  }
}

const char* reset_level_name(uint32_t level) {
  constexpr const char* kNames[] = {"none", "job_abort", "cores", "chip", "full"};
  static_assert(std::size(kNames) == CALRT_RESET_LEVEL_COUNT_);
  return level < std::size(kNames) ? kNames[level] : "?";
}

const char* job_state_name(CalrtJobState state) {
  switch (state) {
    case CALRT_JOB_SUBMITTED:
      return "SUBMITTED";
    case CALRT_JOB_RUNNING:
      return "RUNNING";
    case CALRT_JOB_COMPLETED:
      return "COMPLETED";
    case CALRT_JOB_FAILED:
      return "FAILED";
    case CALRT_JOB_CANCELLED:
      return "CANCELLED";
    case CALRT_JOB_TIMED_OUT:
      return "TIMED_OUT";
    default:
      return "?";
  }
}

bool job_transition_allowed(CalrtJobState from, CalrtJobState to) {
  const size_t f = job_index(from);
  const size_t t = job_index(to);
  return f < kJobStates.size() && t < kJobStates.size() && kJobTransitions[f][t];
}

bool move_job_state(CalrtJobState& state, CalrtJobState to, uint64_t& violations) {
  if (!job_transition_allowed(state, to)) {
    ++violations;
    return false;
  }
  state = to;
  return true;
}

}  // namespace simdev
