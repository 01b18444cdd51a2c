// dispatch.hpp: runs one decoded request against the simulator's C table: fills the args
// struct from the request's In (enums by raw value), calls, turns the CalrtError* into code
// and message, and fills the response's Out. Also releases what a session holds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "abi/calrt.h"
#include "simdev/service/protocol.hpp"
#include "simdev/service/server/calls/device_host.hpp"
#include "simdev/service/server/session/session_handles.hpp"

namespace simdev::service::server {

// What one session owns on the device. Touched only on the device lane, except the handle
// table, which the session's wait lane reads too (it locks itself).
struct SessionObjects {
  struct Mapping {
    void* data = nullptr;
    uint64_t size = 0;
  };
  HandleTable handles;
  // (buffer id, tensor index) -> the daemon-side mapping, kept until Buffer_Unmap.
  std::map<std::pair<uint64_t, uint32_t>, Mapping> mappings;
  bool attached = false;
  // Jobs of this session that another session's Device_Reset found in flight: job id -> the
  // resetting session. Job_Status reports such a job, once CANCELLED, as PREEMPTED.
  std::map<uint64_t, uint64_t> preempted_by;
  // The job of the session's last Batch that ended with a Job_Wait (0: its submit failed).
  // Until that batch's answer the client does not know the job's id, so Job_Status,
  // Job_Cancel and Job_Destroy name it as job 0 (PROTOCOL.md, "Held buffer calls").
  uint64_t batch_job = 0;
};

struct DispatchContext {
  const CalrtApi* api = nullptr;
  DeviceHost* host = nullptr;
  SessionObjects* objects = nullptr;
  const char* call_name = "";  // of the call being run, for messages
  // Canonical --calbin-root directories; empty: Calbin_Create opens any path.
  const std::vector<std::filesystem::path>* calbin_roots = nullptr;
  // The session's role (PROTOCOL.md, "Security model"): without it, device-wide calls answer
  // PERMISSION_DENIED.
  bool control = false;
  uint64_t session_id = 0;
  // Running a Batch's calls: the client reads their answers for the code only (it holds a
  // held map's bytes already), so Buffer_Map copies no bytes into its answer.
  bool in_batch = false;
  // Runs a callable exclusive of the device lane: directly on the device lane itself; a call
  // run on a wait lane must not touch the session's objects otherwise.
  std::function<void(const std::function<void()>&)> on_device_lane;
};

struct Outcome {
  Call call = Call::device_create;
  uint32_t code = CALRT_OK;
  std::vector<uint8_t> payload;  // the response payload
};

Outcome dispatch(DispatchContext& context, const Request& request);
// The response to `request` that the daemon gives without running it: `code`, `message`.
Outcome refused_outcome(const Request& request, uint32_t code, const std::string& message);

// Cancels the session's jobs, then releases its KV handles, buffers and calbins in that
// order, and detaches it from the device. Idempotent. Returns the detach's outcome.
Failure release_session(DispatchContext& context);

// Requests that go to the session's wait lane instead of the device lane.
bool is_wait_call(const Request& request);

// A Batch that ends with a Job_Submit and then a Job_Wait of job 0 (that submit's job) runs
// the wait on the device lane, right after the batch: only on a virtual clock, where a wait
// never sleeps (it runs the device's events under the device's lock, whichever thread
// calls it), so another call of the session could not have run beside it anyway. On any
// other clock the wait would hold the lane while the job runs: such a batch is refused whole.
// Takes the wait off the batch; nullopt, leaving the request as it is, for any other request.
std::optional<JobWait::In> take_trailing_wait(Request& request);
inline constexpr const char* kTrailingWaitNeedsVirtualClock =
    "Batch: a trailing Job_Wait needs a device on a virtual clock (Device_Create's clock_mode "
    "1); on this one it would hold the device lane while the job runs";
// The job the batch's submit made, when every call of the batch succeeded; the batch is then
// answered by the wait's own response.
std::optional<WireHandle> submitted_job(const Outcome& batch);
Call call_of(const Request& request);
// The call whose scheduling rules apply: a Batch ending with a Job_Submit is a submit.
Call scheduled_as(const Request& request);

}  // namespace simdev::service::server
