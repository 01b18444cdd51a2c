// Entries: submitting, waiting for, inspecting and cancelling jobs. A wait that sees its job
// final brings the job's status along, and Job_Status answers from it. A job seen final for the
// first time is checked against its submission snapshot: a COMPLETED job whose buffers'
// shadows were written meanwhile (a mapping kept past unmap) is reported FAILED with
// BUFFER_REUSE, as the in-process simulator reports it.
#include "simdev/service/client/entries/entry_points.hpp"
#include "simdev/service/client/entries/entry_support.hpp"

namespace simdev::service::client {
namespace {

// The state to report for a job the daemon reports in `state`; called with the device's
// mutex held.
uint32_t observe(ClientJob& job, uint32_t state) {
  if (calrt_job_state_final(state) && !job.seen_final) {
    job.seen_final = true;
    if (state == CALRT_JOB_COMPLETED) {
      const ClientBuffer* written = nullptr;
      std::optional<uint32_t> tensor;
      if (job.input &&
          (tensor = changed_tensor(job.snapshot.input, job.input->shadows.fingerprints()))) {
        written = job.input.get();
      } else if (job.output && (tensor = changed_tensor(job.snapshot.output,
                                                        job.output->shadows.fingerprints()))) {
        written = job.output.get();
      }
      if (written != nullptr) {
        job.reuse = "job #" + std::to_string(job.serial) +
                    ": buffer reuse: the host wrote buffer #" + std::to_string(written->serial) +
                    " (tensor " + std::to_string(*tensor) + ") while job #" +
                    std::to_string(job.serial) +
                    " owned it (a mapping used after unmap, before the job was final)";
      }
    }
    // The buffers are the host's again; the job no longer needs them.
    job.input.reset();
    job.output.reset();
    job.snapshot = {};
  }
  return job.reuse ? uint32_t{CALRT_JOB_FAILED} : state;
}

bool settled_unsent(const ClientJob& job) { return job.wire == 0 && job.final_status.has_value(); }

// Sends call C (whose only field is the job) about `job`; nullopt for a job whose held submit
// failed, which never reached the daemon (it is FAILED, and final_status says why). A submit the
// client still holds goes first. A job whose submit is on the wire in a batch ending with its
// Job_Wait has no daemon id yet: it is named as job 0, the daemon's name for that batch's job,
// and sent before any later batch could make another job job 0.
template <class C>
std::optional<Expected<Response<C>>> call_on_job(Resolved<ClientJob>& job) {
  ClientDevice& device = *job.device;
  bool held = false;
  {
    std::lock_guard lock(device.mutex);
    held = device.held.submitted == job.object;
  }
  if (held) {
    if (Status flushed = flush_held(device); !flushed) {
      std::lock_guard lock(device.mutex);
      if (!settled_unsent(*job.object)) return tl::unexpected(flushed.error());
    }
  }
  std::unique_lock order(device.held_send_mutex);
  uint64_t wire = 0;
  {
    std::lock_guard lock(device.mutex);
    if (settled_unsent(*job.object)) return std::nullopt;
    wire = job.object->wire;
  }
  if (wire != 0) {
    order.unlock();
    return round_trip<C>(device, typename C::In{WireHandle{wire}});
  }
  auto connection = device.current_connection();
  if (!connection) return fail(CALRT_DEVICE_LOST, "the device is lost");
  auto sent = connection->send_request(encode_request_payload<C>(typename C::In{}));
  order.unlock();
  auto bytes = sent ? connection->await_response(*sent) : tl::unexpected(sent.error());
  if (!bytes) return tl::unexpected(bytes.error());
  auto response = decode_response_payload<C>(*bytes);
  if (!response) {
    return fail(CALRT_INTERNAL, "malformed answer from the daemon: " + response.error());
  }
  note_answer(device, C::kCall, response->code);
  std::lock_guard lock(device.mutex);
  // The batch's submit failed meanwhile: the daemon had no job 0 to act on.
  if (response->code != CALRT_OK && settled_unsent(*job.object)) return std::nullopt;
  return std::move(*response);
}

// The daemon id of a job whose submit another thread's Job_Wait has sent, once its answer
// has come (0: the submit failed); nullopt when `timeout_ns` passed first.
std::optional<uint64_t> sent_job_wire(ClientDevice& device, const ClientJob& job,
                                      uint64_t timeout_ns) {
  std::unique_lock lock(device.mutex);
  auto sent = [&] { return job.wire != 0 || job.final_status.has_value(); };
  if (timeout_ns == CALRT_TIMEOUT_INFINITE) {
    device.job_sent.wait(lock, sent);
  } else if (!device.job_sent.wait_for(lock, std::chrono::nanoseconds(timeout_ns), sent)) {
    return std::nullopt;
  }
  return job.wire;
}

// A job that a device fault failed left the device FAULTED: what the client knew the daemon
// would accept no longer holds. Called with the device's mutex held.
void note_job_code(ClientDevice& device, uint32_t code) {
  if (CALRT_CODE_FAULT_CLASS(code) == CALRT_FAULT_DEVICE) device.held.forget_answers();
}

// Fills the caller's struct from the daemon's status of the job.
Status report_status(Resolved<ClientJob>& job, Calrt_Job_Status_Args* args,
                     const JobStatusOut& out) {
  std::lock_guard lock(job.device->mutex);
  ClientJob& j = *job.object;
  fill_outs<JobStatus>(out, *args, j.strings);
  args->state = static_cast<CalrtJobState>(observe(j, out.state));
  if (j.reuse) {
    args->code = CALRT_BUFFER_REUSE;
    args->message = j.strings.keep(*j.reuse);
  }
  note_job_code(*job.device, out.code);
  return {};
}

}  // namespace

CalrtError* job_submit(Calrt_Job_Submit_Args* args) {
  return guarded(args, CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE, "Calrt_Job_Submit_Args", [&]() -> Status {
    auto calbin = resolve_calbin(args->calbin, "calbin");
    if (!calbin) {
      return tl::unexpected(calbin.error());
    }
    if (args->model_name == nullptr) {
      return fail(CALRT_INVALID_ARGUMENT, "model_name is NULL");
    }
    ClientDevice& device = *calbin->device;
    auto input = resolve_buffer_of(device, args->input, "input buffer");
    auto output = resolve_buffer_of(device, args->output, "output buffer");
    if (!input || !output) {
      return tl::unexpected(!input ? input.error() : output.error());
    }
    auto job = std::make_shared<ClientJob>();
    job->input = input->object;
    job->output = output->object;
    {
      std::lock_guard lock(device.mutex);
      job->snapshot.input = input->object->shadows.fingerprints();
      job->snapshot.output = output->object->shadows.fingerprints();
      input->object->fetched.clear();
      output->object->fetched.clear();
      ++input->object->submissions;
      job->output_submission = ++output->object->submissions;
    }
    auto in = wire_in<JobSubmit>(*args);
    in.calbin = WireHandle{calbin->wire};
    in.input = WireHandle{input->wire};
    in.output = WireHandle{output->wire};
    std::vector<uint8_t> request = encode_request_payload<JobSubmit>(in);
    uint64_t epoch = 0;
    {
      std::lock_guard lock(device.mutex);
      if (may_hold_submit(device, request)) {
        job->serial = device.next_serial++;
        const std::optional<LocalId> id = device.jobs.insert(job);
        if (!id) return fail(CALRT_OUT_OF_RANGE, "too many jobs on the device");
        hold_submit(device, std::move(request), job);
        args->job = to_handle<CalrtJob>(HandleKind::kJob, device.slot, *id);
        return {};
      }
      epoch = device.held.known_submit_epoch;
      // Until the job is in the table, no buffer call may be held: the job may own its buffers.
      ++device.held.submits_in_flight;
    }
    struct InFlight {
      ClientDevice& device;
      ~InFlight() {
        std::lock_guard lock(device.mutex);
        --device.held.submits_in_flight;
      }
    } in_flight{device};
    auto response = submit_after_held(device, in);
    if (!response) {
      return tl::unexpected(response.error());
    }
    if (Status ok = status_of(*response); !ok) {
      return ok;
    }
    const WireHandle wire = response->out.job;
    job->wire = wire.id;
    std::optional<LocalId> id;
    {
      std::lock_guard lock(device.mutex);
      job->serial = device.next_serial++;
      id = device.jobs.insert(job);
      if (id) remember_submit(device, std::move(request), epoch);
    }
    if (!id) {
      (void)round_trip<JobDestroy>(device, JobDestroy::In{wire});
      return fail(CALRT_OUT_OF_RANGE, "too many jobs on the device");
    }
    args->job = to_handle<CalrtJob>(HandleKind::kJob, device.slot, *id);
    return {};
  });
}

CalrtError* job_wait(Calrt_Job_Wait_Args* args) {
  return guarded(args, CALRT_JOB_WAIT_ARGS_STRUCT_SIZE, "Calrt_Job_Wait_Args", [&]() -> Status {
    auto job = resolve_job(args->job, "job");
    if (!job) {
      return tl::unexpected(job.error());
    }
    ClientDevice& device = *job->device;
    JobWait::In in;
    in.timeout_ns = args->timeout_ns;
    std::shared_ptr<ClientBuffer> output;
    {
      // The outputs the host read before come back with the answer.
      std::lock_guard lock(device.mutex);
      output = job->object->output;
      if (output) {
        in.output = WireHandle{output->wire};
        for (uint32_t tensor : output->shadows.tensors()) in.fetch.push_back({tensor});
      }
    }
    // A held submit goes with this wait (job 0: the batch's own job).
    auto response = wait_after_held(device, *job->object, in);
    if (!response) {
      // Another thread's wait sent it: this one waits for that answer, within its timeout.
      auto wire = sent_job_wire(device, *job->object, args->timeout_ns);
      if (!wire) {
        args->state = CALRT_JOB_SUBMITTED;
        args->result = CALRT_WAIT_NOT_READY;
        return {};
      }
      if (*wire != 0) {
        in.job = WireHandle{*wire};
        response = round_trip<JobWait>(device, in);
      }
    }
    if (!response || !*response) {
      // A job whose held submit failed is FAILED, and the failure is the wait's error.
      std::lock_guard lock(device.mutex);
      const ClientJob& j = *job->object;
      if (j.wire == 0 && j.final_status) {
        args->state = CALRT_JOB_FAILED;
        args->result = CALRT_WAIT_READY;
        if (!response) {
          return fail(static_cast<CalrtCode>(j.final_status->code), j.final_status->message);
        }
      }
      if (!response) return fail(CALRT_INTERNAL, "Job_Wait: the job has no daemon id");
      return tl::unexpected(response->error());
    }
    auto& answer = *response;
    // The job's state is reported with an error too (DEVICE_HUNG: TIMED_OUT).
    if (answer->out.state != 0) {
      std::lock_guard lock(device.mutex);
      args->state = static_cast<CalrtJobState>(observe(*job->object, answer->out.state));
      args->result = static_cast<CalrtWaitResult>(answer->out.result);
      if (answer->out.status.size() == 1 && answer->out.status[0].state == answer->out.state &&
          calrt_job_state_final(answer->out.state)) {
        note_job_code(device, answer->out.status[0].code);
        job->object->final_status = std::move(answer->out.status[0]);
      }
      // After observe(): the shadows' fingerprints are compared with the submission's first.
      // Unless another job took the buffer meanwhile (another thread submitted it).
      if (output && answer->out.state == CALRT_JOB_COMPLETED &&
          output->submissions == job->object->output_submission) {
        for (const FetchedTensor& tensor : answer->out.outputs) {
          if (output->shadows.refill(tensor.index, tensor.data)) {
            output->fetched.insert(tensor.index);
          }
        }
      }
    }
    return status_of(*answer);
  });
}

CalrtError* job_status(Calrt_Job_Status_Args* args) {
  // The profiling fields were appended later: a caller compiled before them is served.
  return guarded(args, CALRT_STRUCT_SIZE(Calrt_Job_Status_Args, end_time_ns),
                 "Calrt_Job_Status_Args", [&]() -> Status {
                   auto job = resolve_job(args->job, "job");
                   if (!job) {
                     return tl::unexpected(job.error());
                   }
                   std::optional<JobStatusOut> known;
                   {
                     std::lock_guard lock(job->device->mutex);
                     known = job->object->final_status;
                   }
                   if (known) {
                     return report_status(*job, args, *known);
                   }
                   auto response = call_on_job<JobStatus>(*job);
                   if (!response) {
                     std::lock_guard lock(job->device->mutex);
                     known = job->object->final_status;
                     return report_status(*job, args, *known);
                   }
                   if (!*response) {
                     return tl::unexpected(response->error());
                   }
                   if (Status ok = status_of(**response); !ok) {
                     return ok;
                   }
                   return report_status(*job, args, (*response)->out);
                 });
}

CalrtError* job_cancel(Calrt_Job_Cancel_Args* args) {
  return guarded(args, CALRT_JOB_CANCEL_ARGS_STRUCT_SIZE, "Calrt_Job_Cancel_Args", [&]() -> Status {
    auto job = resolve_job(args->job, "job");
    if (!job) {
      return tl::unexpected(job.error());
    }
    auto response = call_on_job<JobCancel>(*job);
    // A job whose held submit failed is final already: cancelling it changes nothing.
    if (!response) {
      return {};
    }
    if (!*response) {
      return tl::unexpected(response->error());
    }
    return status_of(**response);
  });
}

CalrtError* job_destroy(Calrt_Job_Destroy_Args* args) {
  return guarded(args, CALRT_JOB_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Job_Destroy_Args",
                 [&]() -> Status {
                   auto job = resolve_job(args->job, "job");
                   if (!job) {
                     return tl::unexpected(job.error());
                   }
                   ClientDevice& device = *job->device;
                   {
                     // A final job's release cannot fail: it rides with the next submit.
                     std::lock_guard lock(device.mutex);
                     if (job->object->seen_final && job->object->wire != 0 && may_hold(device)) {
                       hold<JobDestroy>(device, JobDestroy::In{WireHandle{job->object->wire}});
                       device.jobs.erase(job->id);
                       return {};
                     }
                   }
                   if (!device.lost()) {
                     // nullopt: a job whose held submit failed never reached the daemon.
                     auto response = call_on_job<JobDestroy>(*job);
                     Status ok = !response    ? Status{}
                                 : !*response ? Status{tl::unexpected(response->error())}
                                              : status_of(**response);
                     if (!ok && ok.error().code != CALRT_DEVICE_LOST) {
                       return ok;
                     }
                   }
                   std::lock_guard lock(device.mutex);
                   device.jobs.erase(job->id);
                   return {};
                 });
}

}  // namespace simdev::service::client
