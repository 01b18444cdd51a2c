// Device: job submission, the job lifecycle on the virtual clock, wait, cancel, destroy.
#include <algorithm>

#include "simdev/device/device.hpp"

namespace simdev {
namespace {

std::string job_label(const Job& job) { return "job #" + std::to_string(job.serial); }

}  // namespace

Status Device::validate_submit(ObjectId calbin_id, const CalbinImage& image, size_t model_index,
                               ObjectId input_id, ObjectId output_id) {
  const calbin::Model& model = image.manifest.models[model_index];
  auto input = find_buffer(input_id);
  auto output = find_buffer(output_id);
  if (!input || !output) {
    return tl::unexpected(!input ? input.error() : output.error());
  }
  for (const auto& [buffer, direction] :
       {std::pair{*input, CALRT_INPUT}, std::pair{*output, CALRT_OUTPUT}}) {
    const std::string label = "buffer #" + std::to_string(buffer->serial);
    if (!(buffer->calbin == calbin_id) || buffer->direction != direction ||
        buffer->model_index != model_index) {
      return fail(CALRT_INVALID_ARGUMENT, label + " is not an " +
                                              (direction == CALRT_INPUT ? "input" : "output") +
                                              " buffer of model \"" + model.name +
                                              "\" in calbin #" + std::to_string(image.serial));
    }
    if (auto free = check_owner(*buffer, "submit with"); !free) {
      return free;
    }
    if (buffer->any_mapped()) {
      return fail(CALRT_BUSY, label + " has a mapped tensor; unmap it before submitting");
    }
  }
  if ((*input)->slot != (*output)->slot || ((*input)->slot != 0 && !parallel_mode_)) {
    return fail(CALRT_INVALID_ARGUMENT, "input slot " + std::to_string((*input)->slot) +
                                            " and output slot " + std::to_string((*output)->slot) +
                                            " do not form a valid pair in this mode");
  }
  return {};
}

Status Device::check_in_flight_limit(ObjectId calbin_id, const CalbinImage& image,
                                     uint32_t slot) const {
  // Sync mode: one job per calbin; parallel mode: two, one per slot.
  size_t same_slot = 0;
  size_t in_flight = 0;
  jobs_.for_each([&](ObjectId, const Job& other) {
    if (other.calbin == calbin_id && !other.final()) {
      ++in_flight;
      same_slot += other.slot == slot ? 1 : 0;
    }
  });
  if ((!parallel_mode_ && in_flight > 0) || in_flight > 1 || same_slot > 0) {
    return fail(CALRT_BUSY, "calbin #" + std::to_string(image.serial) + " already has " +
                                std::to_string(in_flight) + " job(s) in flight" +
                                (parallel_mode_ ? " (one per slot in parallel mode)"
                                                : " (sync mode allows one)"));
  }
  return {};
}

Expected<KvHandle*> Device::applied_kv(const Buffer& input, calbin::ModelType type) const {
  if (type == calbin::ModelType::kKvUpdate) {
    return nullptr;  // no KV is read or extended
  }
  KvHandle* kv = input.kv ? kvs_.find(*input.kv) : nullptr;
  if (kv == nullptr) {
    const std::string why =
        input.kv ? " lost its KV handle (" + tombstones_.describe(*input.kv, "freed") + ")"
                 : " has no KV handle applied";
    return fail(CALRT_WRONG_STATE, "input buffer #" + std::to_string(input.serial) + why);
  }
  if (kv->user_job) {
    return fail(CALRT_BUSY, "kv handle #" + std::to_string(kv->serial) +
                                " is used by in-flight job #" +
                                std::to_string(kv->user_job_serial));
  }
  return kv;
}

Expected<ObjectId> Device::job_submit(ObjectId calbin_id, std::string_view model_name,
                                      ObjectId input_id, ObjectId output_id) {
  auto found = configured_model(calbin_id, model_name, "Job_Submit");
  if (!found) {
    return tl::unexpected(found.error());
  }
  const CalbinImage& image = *found->image;
  const size_t model_index = found->model_index;
  if (auto valid = validate_submit(calbin_id, image, model_index, input_id, output_id); !valid) {
    return tl::unexpected(valid.error());
  }
  Buffer& input = *buffers_.find(input_id);
  Buffer& output = *buffers_.find(output_id);
  if (auto room = check_in_flight_limit(calbin_id, image, input.slot); !room) {
    return tl::unexpected(room.error());
  }
  auto kv = applied_kv(input, image.manifest.models[model_index].type);
  if (!kv) {
    return tl::unexpected(kv.error());
  }
  if (job_queue_.size() >= kMaxQueuedJobs) {
    return fail(CALRT_BUSY, "device job queue is full (" + std::to_string(kMaxQueuedJobs) + ")");
  }
  auto job = std::make_unique<Job>();
  job->serial = next_serial_++;
  job->calbin = calbin_id;
  job->model_index = model_index;
  job->input = input_id;
  job->output = output_id;
  job->slot = input.slot;
  job->csrs = input.csrs;  // the device reads the CSRs at submission
  job->submit_ps = engine_.now();
  if (*kv != nullptr) {
    job->kv = input.kv;
  }
  const uint64_t serial = job->serial;
  auto id = jobs_.insert(std::move(job));
  if (!id) {
    return fail(CALRT_OUT_OF_RANGE,
                "too many live jobs (limit " + std::to_string(kMaxJobs) + "); destroy old ones");
  }
  input.owner_job = output.owner_job = *id;
  input.owner_job_serial = output.owner_job_serial = serial;
  if (*kv != nullptr) {
    (*kv)->user_job = *id;
    (*kv)->user_job_serial = serial;
  }
  enqueue(*id);
  return *id;
}

void Device::enqueue(ObjectId job_id) {
  job_queue_.push_back(job_id);
  if (!running_job_) {
    start_next();
  }
}

void Device::start_next() {
  if (running_job_ || job_queue_.empty()) {
    return;
  }
  const ObjectId next = job_queue_.front();
  job_queue_.pop_front();
  Job* job = jobs_.find(next);
  auto key = engine_.after(0, Band::kJobStart, [this, next] { on_job_start(next); });
  if (!key) {
    finish(*job, CALRT_JOB_FAILED, CALRT_INTERNAL, key.error().message);
    start_next();
    return;
  }
  running_job_ = next;
  job->pending_event = *key;
}

void Device::on_job_start(ObjectId job_id) {
  Job* job = jobs_.find(job_id);
  if (job == nullptr || job->final()) {
    return;
  }
  job->state = CALRT_JOB_RUNNING;
  job->start_ps = engine_.now();
  job->pending_event.reset();
  Expected<TimePs> duration = fail(CALRT_INTERNAL, "unset");
  if (auto fault = fault_plan_->on_job_start(job->serial, engine_.now())) {
    duration = tl::unexpected(*fault);
  } else {
    duration = execute(*job);
  }
  TimePs run_ps = 0;
  if (duration) {
    run_ps = *duration;
  } else {
    // A request error is found early: the job fails after the submission overhead.
    job->code = duration.error().code;
    job->message = job_label(*job) + ": " + duration.error().message;
    run_ps = ns_to_ps(config_.submit_overhead_ns);
  }
  auto key = engine_.after(run_ps, Band::kJobComplete, [this, job_id] { on_job_complete(job_id); });
  if (!key) {
    running_job_.reset();
    finish(*job, CALRT_JOB_FAILED, CALRT_INTERNAL, key.error().message);
    start_next();
    return;
  }
  job->pending_event = *key;
}

void Device::on_job_complete(ObjectId job_id) {
  Job* job = jobs_.find(job_id);
  if (job != nullptr && !job->final()) {
    job->pending_event.reset();
    const CalrtCode code = job->code;
    if (CALRT_CODE_FAULT_CLASS(code) == CALRT_FAULT_DEVICE) {
      faulted_ = true;
      ++error_count_;
      last_error_ = code;
    }
    finish(*job, code == CALRT_OK ? CALRT_JOB_COMPLETED : CALRT_JOB_FAILED, code,
           std::string(job->message));
  }
  if (running_job_ && *running_job_ == job_id) {
    running_job_.reset();
  }
  start_next();
}

void Device::finish(Job& job, CalrtJobState state, CalrtCode code, std::string message) {
  job.state = state;
  job.code = code;
  job.message = std::move(message);
  job.end_ps = engine_.now();
  if (job.pending_event) {
    engine_.queue().cancel(*job.pending_event);
    job.pending_event.reset();
  }
  release_job_resources(job);
}

void Device::release_job_resources(Job& job) {
  for (ObjectId id : {job.input, job.output}) {
    if (Buffer* buffer = buffers_.find(id)) {
      buffer->owner_job.reset();
    }
  }
  if (job.kv) {
    if (KvHandle* kv = kvs_.find(*job.kv)) {
      kv->user_job.reset();
    }
  }
}

Expected<WaitOutcome> Device::job_wait(ObjectId id, uint64_t timeout_ns) {
  auto found = find_job(id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  const TimePs deadline = saturating_add(engine_.now(), timeout_ps(timeout_ns));
  Job* job = *found;
  auto ran = engine_.run_until(deadline, [&] { return job->final(); });
  if (!ran) {
    return tl::unexpected(ran.error());
  }
  if (job->state == CALRT_JOB_FAILED && CALRT_CODE_FAULT_CLASS(job->code) == CALRT_FAULT_DEVICE) {
    return fail(job->code, job->message);  // the job is FAILED; the device needs a reset
  }
  return WaitOutcome{job->final() ? CALRT_WAIT_READY : CALRT_WAIT_NOT_READY, job->state};
}

Expected<const Job*> Device::job(ObjectId id) const {
  auto found = find_job(id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  return *found;
}

Status Device::job_cancel(ObjectId id) {
  auto found = find_job(id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  Job& job = **found;
  if (job.final()) {
    return {};
  }
  std::erase(job_queue_, id);
  const bool was_running = running_job_ && *running_job_ == id;
  finish(job, CALRT_JOB_CANCELLED, CALRT_CANCELLED, job_label(job) + " was cancelled");
  if (was_running) {
    running_job_.reset();
    start_next();
  }
  return {};
}

void Device::cancel_all(const std::string& reason) {
  std::vector<ObjectId> live;
  jobs_.for_each([&](ObjectId id, const Job& job) {
    if (!job.final()) {
      live.push_back(id);
    }
  });
  job_queue_.clear();
  running_job_.reset();
  for (ObjectId id : live) {
    Job& job = *jobs_.find(id);
    finish(job, CALRT_JOB_CANCELLED, CALRT_CANCELLED, job_label(job) + " " + reason);
  }
}

Status Device::job_destroy(ObjectId id) {
  if (auto cancelled = job_cancel(id); !cancelled) {
    return cancelled;
  }
  tombstones_.bury(id, job_label(*jobs_.find(id)) + " was destroyed");
  jobs_.erase(id);
  return {};
}

}  // namespace simdev
