#include "simdev/service/client/held_calls.hpp"

#include <optional>
#include <string>
#include <utility>

#include "simdev/service/client/client_device.hpp"

namespace simdev::service::client {
namespace {

struct AnswerHead {
  Call call = Call::batch;
  uint32_t code = CALRT_OK;
  std::string message;
};

// The call, code and message at the front of any response payload.
Expected<AnswerHead> answer_head(const Bytes& payload) {
  Reader r(payload);
  AnswerHead head;
  head.call = static_cast<Call>(r.u16("call"));
  r("code", head.code);
  r("message", head.message);
  if (!r.ok()) return fail(CALRT_INTERNAL, "malformed answer from the daemon: Batch: " + r.error());
  return head;
}

// Sends what the device holds, then `last` if given, as one Batch; nullopt when there was
// nothing to send. On success the answer of the last call, which ran; a held call that failed
// is this call's failure, and its message says so.
std::optional<Expected<Bytes>> run_batch(ClientDevice& device, const Bytes* last,
                                         const char* before) {
  std::unique_lock order(device.held_send_mutex);
  Batch::In in;
  {
    std::lock_guard lock(device.mutex);
    device.held.bytes = 0;
    in.calls = std::exchange(device.held.calls, {});
  }
  // On a lost connection they have nowhere to go; the call itself answers DEVICE_LOST, or
  // what a lost device answers.
  if (in.calls.empty() || device.lost()) return std::nullopt;
  if (last != nullptr) in.calls.push_back(HeldCall{*last});
  const size_t count = in.calls.size();
  auto connection = device.current_connection();
  if (!connection) return fail(CALRT_DEVICE_LOST, "the device is lost");
  auto sent = connection->send_request(encode_request_payload<Batch>(in));
  order.unlock();
  auto bytes = sent ? connection->await_response(*sent) : tl::unexpected(sent.error());
  if (!bytes) {
    note_answer(device, Call::batch, bytes.error().code);
    return tl::unexpected(bytes.error());
  }
  auto answer = decode_response_payload<Batch>(*bytes);
  if (!answer) return fail(CALRT_INTERNAL, "malformed answer from the daemon: " + answer.error());
  if (answer->code != CALRT_OK) {
    note_answer(device, Call::batch, answer->code);
    return fail(static_cast<CalrtCode>(answer->code), answer->message);
  }
  auto head = answer_head(answer->out.response);
  if (!head) return tl::unexpected(head.error());
  note_answer(device, head->call, head->code);
  if (answer->out.ran == 0 || answer->out.ran > count) {
    return fail(CALRT_INTERNAL, "malformed answer from the daemon: Batch ran " +
                                    std::to_string(answer->out.ran) + " of " +
                                    std::to_string(count) + " calls");
  }
  if (answer->out.ran < count || (before == nullptr && head->code != CALRT_OK)) {
    return fail(static_cast<CalrtCode>(head->code),
                std::string(to_string(head->call)) + ", held by the client until " +
                    (before != nullptr ? before : "this call") + ", failed: " + head->message);
  }
  return std::move(answer->out.response);
}

}  // namespace

bool may_hold(ClientDevice& device) {
  if (!device.held.writes_accepted || device.held.submits_in_flight != 0 ||
      device.held.bytes >= kMaxHeldBytes || device.held.calls.size() >= kMaxHeldCalls ||
      !device.connection || device.connection->lost()) {
    return false;
  }
  bool in_flight = false;
  device.jobs.for_each([&](LocalId, const ClientJob& job) { in_flight |= !job.seen_final; });
  return !in_flight;
}

void hold_payload(ClientDevice& device, std::vector<uint8_t> request) {
  device.held.bytes += request.size();
  device.held.calls.push_back(HeldCall{std::move(request)});
}

Status flush_held(ClientDevice& device) {
  auto answer = run_batch(device, nullptr, nullptr);
  if (answer && !*answer) return tl::unexpected(answer->error());
  return {};
}

Expected<Response<JobSubmit>> submit_after_held(ClientDevice& device, const JobSubmit::In& in) {
  const Bytes submit = encode_request_payload<JobSubmit>(in);
  auto answer = run_batch(device, &submit, "Job_Submit");
  if (!answer) return round_trip<JobSubmit>(device, in);
  if (!*answer) return tl::unexpected(answer->error());
  auto response = decode_response_payload<JobSubmit>(**answer);
  if (!response)
    return fail(CALRT_INTERNAL, "malformed answer from the daemon: " + response.error());
  return std::move(*response);
}

void note_answer(ClientDevice& device, Call call, uint32_t code) {
  std::lock_guard lock(device.mutex);
  bool& accepted = device.held.writes_accepted;
  if (code != CALRT_OK) {
    accepted = false;
    return;
  }
  switch (call) {
    // Refused unless the device takes host writes (STATE_MACHINE.md): their success says it does.
    case Call::buffer_map:
    case Call::buffer_set_csr:
    case Call::job_submit:
      accepted = true;
      break;
    // Change the device's state or the buffers' calbins: the next answer decides again.
    case Call::device_reset:
    case Call::device_set_parallel_mode:
    case Call::calbin_configure:
    case Call::calbin_destroy:
    case Call::fault_set_plan:
      accepted = false;
      break;
    default:
      break;
  }
}

}  // namespace simdev::service::client
