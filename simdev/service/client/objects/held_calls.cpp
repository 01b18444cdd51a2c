#include "simdev/service/client/objects/held_calls.hpp"

#include <optional>
#include <string>
#include <utility>

#include "simdev/service/client/objects/client_device.hpp"

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

// A job whose held submit never ran on the daemon: FAILED, with the failure's code, as its
// Job_Wait and Job_Status report it.
void settle_unsent(ClientDevice& device, ClientJob& job, uint32_t code,
                   const std::string& message) {
  std::lock_guard lock(device.mutex);
  JobStatusOut status;
  status.state = CALRT_JOB_FAILED;
  status.code = code;
  status.message = message;
  job.final_status = std::move(status);
  job.seen_final = true;
  job.input.reset();
  job.output.reset();
  job.snapshot = {};
  device.job_sent.notify_all();
}

void set_job_wire(ClientDevice& device, ClientJob& job, uint64_t wire) {
  std::lock_guard lock(device.mutex);
  job.wire = wire;
  device.job_sent.notify_all();
}

// Sends what the device holds, then `last` if given, as one Batch; nullopt when there was
// nothing to send, or (with `wait_for`) when that job's submit is no longer held. On success
// the answer of the last call, which ran; a held call that failed is this call's failure, and
// its message says so. A held submit's job gets its daemon handle, or is settled FAILED; with
// `wait_for`, a wait's own answer names the job, and the caller reads it there.
std::optional<Expected<Bytes>> run_batch(ClientDevice& device, const Bytes* last,
                                         const char* before, const ClientJob* wait_for = nullptr) {
  std::unique_lock order(device.held_send_mutex);
  Batch::In in;
  std::shared_ptr<ClientJob> job;
  {
    std::lock_guard lock(device.mutex);
    if (wait_for != nullptr && device.held.submitted.get() != wait_for) return std::nullopt;
    device.held.bytes = 0;
    in.calls = std::exchange(device.held.calls, {});
    job = std::exchange(device.held.submitted, nullptr);
  }
  // On a lost connection they have nowhere to go; the call itself answers DEVICE_LOST, or
  // what a lost device answers.
  if (in.calls.empty() || device.lost()) {
    if (job)
      settle_unsent(device, *job, CALRT_DEVICE_LOST, "the device was lost before the job was sent");
    return std::nullopt;
  }
  if (last != nullptr) in.calls.push_back(HeldCall{*last});
  const size_t count = in.calls.size();
  auto connection = device.current_connection();
  auto failed = [&](uint32_t code, const std::string& message) -> Expected<Bytes> {
    if (job) settle_unsent(device, *job, code, message);
    return fail(static_cast<CalrtCode>(code), message);
  };
  if (!connection) return failed(CALRT_DEVICE_LOST, "the device is lost");
  auto sent = connection->send_request(encode_request_payload<Batch>(in));
  order.unlock();
  auto bytes = sent ? connection->await_response(*sent) : tl::unexpected(sent.error());
  if (!bytes) {
    note_answer(device, Call::batch, bytes.error().code);
    return failed(bytes.error().code, bytes.error().message);
  }
  // Every call before the wait succeeded: the answer is the wait's own, decoded once, by the
  // caller (it may carry the job's whole output).
  if (wait_for != nullptr) {
    if (auto head = answer_head(*bytes); head && head->call == Call::job_wait) {
      note_answer(device, head->call, head->code);
      return std::move(*bytes);
    }
  }
  auto answer = decode_response_payload<Batch>(*bytes);
  if (!answer) return failed(CALRT_INTERNAL, "malformed answer from the daemon: " + answer.error());
  if (answer->code != CALRT_OK) {
    note_answer(device, Call::batch, answer->code);
    return failed(answer->code, answer->message);
  }
  auto head = answer_head(answer->out.response);
  if (!head) return failed(head.error().code, head.error().message);
  note_answer(device, head->call, head->code);
  if (answer->out.ran == 0 || answer->out.ran > count ||
      (answer->out.ran < count && head->code == CALRT_OK)) {
    return failed(CALRT_INTERNAL, "malformed answer from the daemon: Batch ran " +
                                      std::to_string(answer->out.ran) + " of " +
                                      std::to_string(count) + " calls");
  }
  if (job && head->call == Call::job_submit && head->code == CALRT_OK) {
    auto submitted = decode_response_payload<JobSubmit>(answer->out.response);
    if (!submitted || submitted->out.job.id == 0) {
      return failed(CALRT_INTERNAL, "malformed answer from the daemon: Batch made no job");
    }
    set_job_wire(device, *job, submitted->out.job.id);
    job.reset();
  }
  if (answer->out.ran < count || (before == nullptr && head->code != CALRT_OK)) {
    return failed(head->code, std::string(to_string(head->call)) + ", held by the client until " +
                                  (before != nullptr ? before : "this call") +
                                  ", failed: " + head->message);
  }
  if (job) return failed(CALRT_INTERNAL, "malformed answer from the daemon: Batch made no job");
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

bool may_hold_submit(ClientDevice& device, const std::vector<uint8_t>& request) {
  return device.virtual_clock && may_hold(device) && device.held.known_submit == request;
}

void hold_submit(ClientDevice& device, std::vector<uint8_t> request,
                 std::shared_ptr<ClientJob> job) {
  hold_payload(device, std::move(request));
  device.held.submitted = std::move(job);
}

void remember_submit(ClientDevice& device, std::vector<uint8_t> request, uint64_t epoch) {
  if (device.held.known_submit_epoch == epoch) device.held.known_submit = std::move(request);
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
  // A submit still held goes alone first: a batch holds one submit, last.
  bool submit_held = false;
  {
    std::lock_guard lock(device.mutex);
    submit_held = device.held.submitted != nullptr;
  }
  if (submit_held) {
    if (Status flushed = flush_held(device); !flushed) return tl::unexpected(flushed.error());
  }
  const Bytes submit = encode_request_payload<JobSubmit>(in);
  auto answer = run_batch(device, &submit, "Job_Submit");
  if (!answer) return round_trip<JobSubmit>(device, in);
  if (!*answer) return tl::unexpected(answer->error());
  auto response = decode_response_payload<JobSubmit>(**answer);
  if (!response)
    return fail(CALRT_INTERNAL, "malformed answer from the daemon: " + response.error());
  return std::move(*response);
}

std::optional<Expected<Response<JobWait>>> wait_after_held(ClientDevice& device, ClientJob& job,
                                                           const JobWait::In& in) {
  const Bytes wait = encode_request_payload<JobWait>(in);
  auto answer = run_batch(device, &wait, "Job_Wait", &job);
  if (!answer) return std::nullopt;
  if (!*answer) return tl::unexpected(answer->error());
  auto response = decode_response_payload<JobWait>(**answer);
  if (!response || response->out.job.id == 0) {
    const std::string message =
        "malformed answer from the daemon: " +
        (response ? std::string("Job_Wait names no job") : response.error());
    settle_unsent(device, job, CALRT_INTERNAL, message);
    return fail(CALRT_INTERNAL, message);
  }
  set_job_wire(device, job, response->out.job.id);
  return std::move(*response);
}

void note_answer(ClientDevice& device, Call call, uint32_t code) {
  std::lock_guard lock(device.mutex);
  bool& accepted = device.held.writes_accepted;
  // Only calls that change nothing a submit checks keep the known submit.
  switch (call) {
    case Call::device_status:
    case Call::device_chip_status:
    case Call::buffer_map:
    case Call::buffer_unmap:
    case Call::buffer_set_csr:
    case Call::buffer_get_csr:
    case Call::job_submit:
    case Call::job_wait:
    case Call::job_status:
    case Call::job_destroy:
    case Call::clock_get:
    case Call::batch:
      if (code == CALRT_OK) break;
      [[fallthrough]];
    default:
      device.held.forget_submit();
  }
  if (code != CALRT_OK) {
    device.held.forget_answers();
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
      device.held.forget_answers();
      break;
    default:
      break;
  }
}

}  // namespace simdev::service::client
