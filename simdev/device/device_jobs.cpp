// Device: job submission, the job lifecycle on the virtual clock, wait, cancel, destroy.
#include <algorithm>
#include <string_view>

#include "simdev/device/device.hpp"

namespace simdev {

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

// The handles of the rows a submission computes: row 0, or a batch decode's live rows
// (cur_seq_len of them, clamped here; begin_compute() rejects a bad count).
Expected<std::vector<Device::AppliedKv>> Device::applied_kv(const Buffer& input,
                                                            const calbin::Manifest& manifest,
                                                            const calbin::Model& model) const {
  std::vector<AppliedKv> kvs;
  if (model.type == calbin::ModelType::kKvUpdate) {
    return kvs;  // no KV is read or extended
  }
  const bool batch = decode_rows(manifest, model) > 1;
  const std::string buffer = "input buffer #" + std::to_string(input.serial);
  for (size_t row = 0; row < live_rows(manifest, model, input.csrs); ++row) {
    const std::optional<ObjectId> id = input.kv_at(row);
    KvHandle* kv = id ? kvs_.find(*id) : nullptr;
    const std::string where = buffer + (batch ? " row " + std::to_string(row) : "");
    if (kv == nullptr) {
      const std::string why =
          id ? " lost its KV handle (" + tombstones_.describe(*id, "freed") + ")"
             : " has no KV handle applied";
      return fail(CALRT_WRONG_STATE, where + why);
    }
    if (kv->user_job) {
      return fail(CALRT_BUSY, "kv handle #" + std::to_string(kv->serial) +
                                  " is used by in-flight job #" +
                                  std::to_string(kv->user_job_serial));
    }
    for (size_t other = 0; other < kvs.size(); ++other) {
      if (kvs[other].kv == kv) {
        return fail(CALRT_INVALID_ARGUMENT, "kv handle #" + std::to_string(kv->serial) +
                                                " serves rows " + std::to_string(other) + " and " +
                                                std::to_string(row) + " of " + buffer +
                                                "; each row is a sequence of its own");
      }
    }
    kvs.push_back({*id, kv});
  }
  return kvs;
}

Expected<ObjectId> Device::job_submit(ObjectId calbin_id, std::string_view model_name,
                                      ObjectId input_id, ObjectId output_id) {
  auto found = configured_model(calbin_id, model_name, DeviceCall::kJobSubmit);
  if (!found) {
    return tl::unexpected(found.error());
  }
  CalbinImage& image = *found->image;
  const size_t model_index = found->model_index;
  if (auto valid = validate_submit(calbin_id, image, model_index, input_id, output_id); !valid) {
    return tl::unexpected(valid.error());
  }
  Buffer& input = *buffers_.find(input_id);
  Buffer& output = *buffers_.find(output_id);
  if (auto room = check_in_flight_limit(calbin_id, image, input.slot); !room) {
    return tl::unexpected(room.error());
  }
  const calbin::Model& model = image.manifest.models[model_index];
  auto kv = applied_kv(input, image.manifest, model);
  if (!kv) {
    return tl::unexpected(kv.error());
  }
  if (jobs_in_flight() >= kMaxQueuedJobs) {
    return fail(CALRT_BUSY, "device job queue is full (" + std::to_string(kMaxQueuedJobs) + ")");
  }
  auto job = std::make_unique<Job>();
  job->serial = next_job_serial_;  // taken below, once the job is in: serials have no gaps
  // finish() copies the job's message in here: a cancel, which another thread's wait is
  // blocked on, then allocates nothing before it can wake it.
  job->message.reserve(kJobMessageReserve);
  job->calbin = calbin_id;
  job->model_index = model_index;
  job->input = input_id;
  job->output = output_id;
  job->slot = input.slot;
  job->csrs = input.csrs;  // the device reads the CSRs at submission
  job->cost = image.cost_plans[model_index].cost(
      job_shape(image.manifest, model, job->csrs, input.tensors));
  job->input_at_submit = input.tensors;
  job->output_at_submit = output.tensors;
  job->submit_ps = engine_.now();
  for (const AppliedKv& applied : *kv) {
    job->kv.push_back(applied.id);
  }
  const uint64_t serial = job->serial;
  const TimePs submit_ps = job->cost.submit_ps;
  auto id = jobs_.insert(std::move(job));
  if (!id) {
    return fail(CALRT_OUT_OF_RANGE,
                "too many live jobs (limit " + std::to_string(kMaxJobs) + "); destroy old ones");
  }
  ++next_job_serial_;
  Job& placed = *jobs_.find(*id);
  const ObjectId job_id = *id;
  placed.id = job_id;
  auto key = engine_.after(submit_ps, Band::kJobStart, [this, job_id] { on_job_arrive(job_id); });
  if (!key) {
    jobs_.erase(job_id);
    return tl::unexpected(key.error());
  }
  placed.pending_event = *key;
  ++in_flight_;
  input.owner_job = output.owner_job = job_id;
  input.owner_job_serial = output.owner_job_serial = serial;
  for (const AppliedKv& applied : *kv) {
    applied.kv->user_job = job_id;
    applied.kv->user_job_serial = serial;
  }
  return job_id;
}

// The pipeline. Each stage (input DMA, compute, output DMA) serves one job at a time in
// arrival order; a job moves on when its stage completes, so the link carries the next
// job's input while the chips compute this one (parallel mode keeps two jobs in flight).

void Device::on_job_arrive(ObjectId job_id) {
  Job* job = jobs_.find(job_id);
  if (job == nullptr || job->final()) {
    return;
  }
  job->pending_event.reset();
  job->stage = Stage::kH2d;
  stages_[static_cast<size_t>(Stage::kH2d)].waiting.push_back(job_id);
  pump();
}

void Device::pump() {
  // Later stages first: a job leaving compute frees the chips before the next one enters.
  for (Stage stage : {Stage::kD2h, Stage::kCompute, Stage::kH2d}) {
    StageQueue& queue = stages_[static_cast<size_t>(stage)];
    while (!queue.busy && !queue.waiting.empty()) {
      const ObjectId next = queue.waiting.front();
      queue.waiting.pop_front();
      start_stage(stage, next);
    }
  }
}

void Device::start_stage(Stage stage, ObjectId job_id) {
  Job& job = *jobs_.find(job_id);
  TimePs duration = 0;
  switch (stage) {
    case Stage::kH2d:
      if (!set_job_state(job, CALRT_JOB_RUNNING)) {
        return;  // counted; a job the table does not let start stays out of the pipeline
      }
      job.start_ps = engine_.now();
      trace_.record({CALRT_TRACK_QUEUE, CALRT_TRACE_QUEUED, 0, -1, job.serial, job.submit_ps,
                     job.start_ps, 0, 0, "queued"});
      duration = job.cost.h2d_ps;
      if (!inject_input_dma(job, duration)) {
        return;
      }
      break;
    case Stage::kCompute: {
      job.compute_start_ps = engine_.now();
      Status began = begin_compute(job);
      if (!began) {
        fail_job(job, began.error().code, began.error().message);
        return;
      }
      // The faults decide when the stage's event fires: at the end of the compute, at a
      // failing D2D reduction, or at the job watchdog.
      if (!inject_compute(job, duration)) {
        return;
      }
      break;
    }
    case Stage::kD2h:
      if (auto reuse = find_reuse(job, job.output, job.output_at_submit); !reuse) {
        fail_job(job, reuse.error().code, reuse.error().message);
        return;
      }
      duration = job.cost.d2h_ps;
      if (!inject_output_dma(job, duration)) {
        return;
      }
      break;
  }
  auto key = engine_.after(duration, Band::kJobComplete,
                           [this, stage, job_id] { on_stage_done(stage, job_id); });
  if (!key) {
    fail_job(job, CALRT_INTERNAL, key.error().message);
    return;
  }
  job.pending_event = *key;
  stages_[static_cast<size_t>(stage)].busy = job_id;
}

void Device::on_stage_done(Stage stage, ObjectId job_id) {
  StageQueue& queue = stages_[static_cast<size_t>(stage)];
  if (queue.busy && *queue.busy == job_id) {
    queue.busy.reset();
  }
  Job* job = jobs_.find(job_id);
  if (job == nullptr || job->final()) {
    pump();
    return;
  }
  job->pending_event.reset();
  if (job->stage_fault) {
    end_stage_with_fault(*job);
    return;
  }
  const TimePs now = engine_.now();
  switch (stage) {
    case Stage::kH2d:
      job->h2d_end_ps = now;
      trace_.record({CALRT_TRACK_PCIE_H2D, CALRT_TRACE_H2D, 0, -1, job->serial, job->start_ps, now,
                     job->cost.h2d_bytes, 0, "input"});
      job->stage = Stage::kCompute;
      stages_[static_cast<size_t>(Stage::kCompute)].waiting.push_back(job_id);
      break;
    case Stage::kCompute:
      job->compute_end_ps = now;
      record_compute(*job);
      faults_.set_activity("idle");
      job->stage = Stage::kD2h;
      stages_[static_cast<size_t>(Stage::kD2h)].waiting.push_back(job_id);
      break;
    case Stage::kD2h: {
      trace_.record({CALRT_TRACK_PCIE_D2H, CALRT_TRACE_D2H, 0, -1, job->serial, job->compute_end_ps,
                     now, job->cost.d2h_bytes, 0, "output"});
      if (auto reuse = find_reuse(*job, job->input, job->input_at_submit); !reuse) {
        fail_job(*job, reuse.error().code, reuse.error().message);
        return;
      }
      if (Buffer* output = buffers_.find(job->output)) {
        output->tensors = std::move(job->staged_outputs);
      }
      finish(*job, CALRT_JOB_COMPLETED, CALRT_OK, "");
      break;
    }
  }
  pump();
}

void Device::record_compute(const Job& job) {
  TimePs begin = job.compute_start_ps;
  for (const Segment& segment : job.cost.segments) {
    for (size_t chip = 0; chip < segment.chips.size(); ++chip) {
      const ChipLoad& load = segment.chips[chip];
      if (chip < chip_busy_ps_.size()) {
        chip_busy_ps_[chip] = saturating_add(chip_busy_ps_[chip], load.ps);
      }
      trace_.record({CALRT_TRACK_CHIP, CALRT_TRACE_COMPUTE, static_cast<uint32_t>(chip),
                     segment.layer, job.serial, begin, saturating_add(begin, load.ps), load.bytes,
                     load.flops, segment.label});
    }
    const TimePs chips_end = saturating_add(begin, segment.chips_ps());
    if (segment.d2d_ps > 0) {
      trace_.record({CALRT_TRACK_D2D, CALRT_TRACE_D2D, 0, segment.layer, job.serial, chips_end,
                     saturating_add(chips_end, segment.d2d_ps), segment.d2d_bytes, 0,
                     segment.label});
    }
    begin = saturating_add(chips_end, segment.d2d_ps);
  }
}

Status Device::find_reuse(const Job& job, ObjectId buffer_id, const TensorBytes& at_submit) {
  const Buffer* buffer = buffers_.find(buffer_id);
  if (buffer == nullptr || buffer->tensors == at_submit) {
    return {};
  }
  ++buffer_reuse_count_;
  return fail(CALRT_BUFFER_REUSE,
              "buffer reuse: the host wrote buffer #" + std::to_string(buffer->serial) +
                  " while job #" + std::to_string(job.serial) +
                  " owned it (a mapping used after unmap, before the job was final)");
}

void Device::fail_job(Job& job, CalrtCode code, const std::string& message) {
  // Device-class failures that no injected fault explains (a broken invariant) need the
  // strongest reset: nothing narrower is known to clear them.
  raise_device_fault(code, CALRT_RESET_FULL, false, job_label(job) + ": " + message);
  finish(job, CALRT_JOB_FAILED, code, job_label(job) + ": " + message);
  pump();
}

void Device::finish(Job& job, CalrtJobState state, CalrtCode code, std::string_view message) {
  if (!set_job_state(job, state)) {
    return;  // e.g. finishing a final job again: counted, and nothing is released twice
  }
  job.code = code;
  job.message.assign(message);
  job.end_ps = engine_.now();
  if (job.pending_event) {
    engine_.queue().cancel(*job.pending_event);
    job.pending_event.reset();
  }
  const ObjectId id = job.id;
  const auto& computing = stages_[static_cast<size_t>(Stage::kCompute)].busy;
  if (computing && *computing == id) {
    faults_.set_activity("idle");
  }
  for (StageQueue& queue : stages_) {
    std::erase(queue.waiting, id);
    if (queue.busy && *queue.busy == id) {
      queue.busy.reset();
    }
  }
  job.stage.reset();
  job.input_at_submit.clear();
  job.output_at_submit.clear();
  job.staged_outputs.clear();
  --in_flight_;
  release_job_resources(job);
}

void Device::release_job_resources(Job& job) {
  for (ObjectId id : {job.input, job.output}) {
    if (Buffer* buffer = buffers_.find(id)) {
      buffer->owner_job.reset();
    }
  }
  for (const ObjectId id : job.kv) {
    if (KvHandle* kv = kvs_.find(id)) {
      kv->user_job.reset();
    }
  }
}

Expected<WaitOutcome> Device::job_wait(ObjectId id, uint64_t timeout_ns, Sleeper* sleeper) {
  if (auto allowed = require_allowed(DeviceCall::kJobWait); !allowed) {
    return tl::unexpected(allowed.error());
  }
  auto found = find_job(id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  const TimePs deadline = saturating_add(engine_.now(), timeout_ps(timeout_ns));
  // Looked up again after every event: in paced mode another thread may destroy the job
  // while this one sleeps.
  auto ran = engine_.run_until(
      deadline,
      [&] {
        const Job* job = jobs_.find(id);
        return job == nullptr || job->final();
      },
      sleeper);
  if (!ran) {
    return tl::unexpected(ran.error());
  }
  found = find_job(id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  const Job* job = *found;
  if (job->state == CALRT_JOB_TIMED_OUT) {
    return fail(job->code, job->message);  // the watchdog ended it: DEVICE_HUNG, needs a reset
  }
  if (job->state == CALRT_JOB_FAILED && CALRT_CODE_FAULT_CLASS(job->code) == CALRT_FAULT_DEVICE) {
    return fail(job->code, job->message);  // the job is FAILED; the device needs a reset
  }
  return WaitOutcome{job->final() ? CALRT_WAIT_READY : CALRT_WAIT_NOT_READY, job->state};
}

Expected<const Job*> Device::job(ObjectId id) const {
  if (auto allowed = require_allowed(DeviceCall::kJobStatus); !allowed) {
    return tl::unexpected(allowed.error());
  }
  auto found = find_job(id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  return *found;
}

Status Device::job_cancel(ObjectId id) {
  if (auto allowed = require_allowed(DeviceCall::kJobCancel); !allowed) {
    return allowed;
  }
  return cancel_job(id);
}

Status Device::cancel_job(ObjectId id) {
  auto found = find_job(id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  Job& job = **found;
  if (job.final()) {
    return {};
  }
  char text[64];  // no allocation on the way to waking a waiter (kJobMessageReserve)
  finish(job, CALRT_JOB_CANCELLED, CALRT_CANCELLED, job_label_into(job, " was cancelled", text));
  if (job.latent_fault && job.stage_fault) {
    // Cancelling does not unhang a chip or bring a link back: only a reset does.
    raise_device_fault(job.stage_fault->code, job.stage_fault->reset_level,
                       job.stage_fault->persistent,
                       job_label(job) + " was cancelled, but " + job.stage_fault->message);
  }
  pump();
  return {};
}

void Device::cancel_all(const std::string& reason) {
  std::vector<ObjectId> live;
  jobs_.for_each([&](ObjectId id, const Job& job) {
    if (!job.final()) {
      live.push_back(id);
    }
  });
  for (ObjectId id : live) {
    Job& job = *jobs_.find(id);
    finish(job, CALRT_JOB_CANCELLED, CALRT_CANCELLED, job_label(job) + " " + reason);
  }
}

Status Device::job_destroy(ObjectId id) {
  if (auto allowed = require_allowed(DeviceCall::kJobDestroy); !allowed) {
    return allowed;
  }
  if (auto cancelled = cancel_job(id); !cancelled) {
    return cancelled;
  }
  tombstones_.bury(id, job_label(*jobs_.find(id)) + " was destroyed");
  jobs_.erase(id);
  return {};
}

}  // namespace simdev
