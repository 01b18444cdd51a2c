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
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "simdev/service/client/fault.hpp"
#include "simdev/service/protocol.hpp"

namespace simdev::service::client {

struct ClientDevice;

struct HeldCalls {
  std::vector<HeldCall> calls;
  size_t bytes = 0;
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

// Sends what the device holds, if anything; the first held call that failed, by name.
Status flush_held(ClientDevice& device);
// Job_Submit with what the device holds in front of it, in one Batch.
Expected<Response<JobSubmit>> submit_after_held(ClientDevice& device, const JobSubmit::In& in);

// Updates writes_accepted from the daemon's answer to one call.
void note_answer(ClientDevice& device, Call call, uint32_t code);

template <class C>
void hold(ClientDevice& device, const typename C::In& in) {
  hold_payload(device, encode_request_payload<C>(in));
}

}  // namespace simdev::service::client
