// Held buffer calls (PROTOCOL.md, "Held buffer calls"). Between two jobs a decode step maps,
// writes and unmaps its inputs and sets its CSRs: a round trip each, about 70 us apiece over
// the Unix socket. The client answers such a call itself when the daemon's answer is already
// known: the same call on the same buffer succeeded before, none of the client's jobs is in
// flight (so no job owns the buffer), and the daemon's last answer left the device accepting
// host writes. It keeps the call's request, and sends every held request, in order, in one
// Batch with the next Job_Submit, or before any other call. The daemon runs them with the same
// handlers as single calls, so the device ends in the same state; a held call that fails
// there (only another session's reset or fault can make it) fails the call it was sent with,
// naming it.
//
// On a virtual clock, a Job_Submit is held the same way when it repeats, byte for byte, the
// client's last submit that the daemon accepted, and nothing since could change the answer. The job
// is then in the client's table with no daemon handle yet; its Job_Wait sends the held calls, the
// submit and the wait in one Batch (one round trip per decode step), and any other call sends them
// first. A held submit that fails there makes the job FAILED with the failure's code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "simdev/device/base/status.hpp"
#include "simdev/service/protocol.hpp"

namespace simdev::service::client {

struct ClientDevice;
struct ClientJob;

struct HeldCalls {
  std::vector<HeldCall> calls;
  size_t bytes = 0;
  // The job whose Job_Submit is the last of `calls`; null when no submit is held.
  std::shared_ptr<ClientJob> submitted;
  // The request of the last Job_Submit the daemon accepted, while nothing since could make
  // the same request fail (note_answer).
  std::optional<std::vector<uint8_t>> known_submit;
  uint64_t known_submit_epoch = 0;  // counts the times known_submit was forgotten

  void forget_submit() {
    known_submit.reset();
    ++known_submit_epoch;
  }
  // The device may refuse what it accepted before (a failure, a reset, a device fault).
  void forget_answers() {
    writes_accepted = false;
    forget_submit();
  }
  // The daemon's last answer left the device accepting host writes (a Buffer_Map,
  // Buffer_SetCsr or Job_Submit succeeded, and nothing since failed or changed the device).
  bool writes_accepted = false;
  // Job_Submit calls between their request and the job's entry in the client's table.
  uint32_t submits_in_flight = 0;
};

// Beyond these the client sends what it holds before holding more.
inline constexpr size_t kMaxHeldBytes = size_t{8} << 20;
inline constexpr size_t kMaxHeldCalls = 1024;

// Whether a buffer call may be answered here now. Called with the device's mutex held.
bool may_hold(ClientDevice& device);
// Keeps one request. Called with the device's mutex held, after may_hold().
template <class C>
void hold(ClientDevice& device, const typename C::In& in);
void hold_payload(ClientDevice& device, std::vector<uint8_t> request);

// Whether a submit of `request` may be answered here now: it repeats the known submit.
// Called with the device's mutex held.
bool may_hold_submit(ClientDevice& device, const std::vector<uint8_t>& request);
// Keeps `job`'s submit, after may_hold_submit(). Called with the device's mutex held.
void hold_submit(ClientDevice& device, std::vector<uint8_t> request,
                 std::shared_ptr<ClientJob> job);
// Records a submit the daemon accepted, unless a call since began (`epoch` is
// known_submit_epoch when it was sent) that could change the answer. With the mutex held.
void remember_submit(ClientDevice& device, std::vector<uint8_t> request, uint64_t epoch);

// Sends what the device holds, if anything; the first held call that failed, by name.
Status flush_held(ClientDevice& device);
// Job_Submit with what the device holds in front of it, in one Batch.
Expected<Response<JobSubmit>> submit_after_held(ClientDevice& device, const JobSubmit::In& in);
// Job_Wait of `job` (job 0 in `in`) after the held calls ending with its submit, in one Batch;
// nullopt when its submit is no longer held (another call sent it: wait as usual).
std::optional<Expected<Response<JobWait>>> wait_after_held(ClientDevice& device, ClientJob& job,
                                                           const JobWait::In& in);

// Updates writes_accepted and known_submit from the daemon's answer to one call.
void note_answer(ClientDevice& device, Call call, uint32_t code);

template <class C>
void hold(ClientDevice& device, const typename C::In& in) {
  hold_payload(device, encode_request_payload<C>(in));
}

}  // namespace simdev::service::client
