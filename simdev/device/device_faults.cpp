// Device: what injected faults do (FAULTS.md). At each device operation the device asks its
// plan (fault_plan.hpp) which faults fire; this file applies each kind's effect on the
// virtual clock: the code, the job's and the device's state, the chips' conditions and the
// data a fault corrupts.
#include <algorithm>

#include "simdev/device/base/random_stream.hpp"
#include "simdev/device/device.hpp"
#include "simdev/device/faults/compute_faults.hpp"
#include "simdev/device/faults/operation_faults.hpp"

namespace simdev {
namespace {

std::string ms_text(TimePs ps) { return std::to_string(ps / kPsPerMs) + " ms"; }

// An uncorrectable ECC error in a chip's weights: one bit of one int8 weight.
std::string flip_weight_bit(ChipWeights& weights, uint64_t draw) {
  if (weights.layers.empty()) {
    return "no weights to flip";
  }
  RandomStream pick(draw, "weights_ecc");
  const size_t layer = pick.below(weights.layers.size());
  std::vector<int8_t>& values = weights.layers[layer].q_proj.values;
  if (values.empty()) {
    return "no weights to flip";
  }
  const size_t element = pick.below(values.size());
  const auto bit = static_cast<uint32_t>(pick.below(8));
  values[element] = static_cast<int8_t>(static_cast<uint8_t>(values[element]) ^ (1u << bit));
  return "chip " + std::to_string(weights.chip) + " layer " + std::to_string(layer) +
         " q_proj element " + std::to_string(element) + " bit " + std::to_string(bit);
}

}  // namespace

Status Device::set_fault_plan(std::string_view yaml) {
  auto plan = parse_fault_plan(yaml, static_cast<uint32_t>(config_.chips));
  if (!plan) {
    return tl::unexpected(plan.error());
  }
  set_fault_plan(std::move(*plan));
  return {};
}

void Device::set_fault_plan(FaultPlanSpec plan) { faults_.set_plan(std::move(plan)); }

std::vector<FaultHitCount> Device::fault_hits() const { return faults_.hits(); }

std::vector<Injection> Device::inject(FaultSite site, FaultPoint point, uint64_t job_serial) {
  return faults_.inject(FaultOperation{site, point, job_serial, engine_.now()});
}

void Device::record_injection(const Injection& injection, FaultSite site, uint64_t job_serial,
                              std::string detail) {
  faults_.record(injection, site, job_serial, engine_.now(), std::move(detail));
}

void Device::raise_device_fault(CalrtCode code, uint32_t level, bool persistent,
                                const std::string& cause) {
  if (CALRT_CODE_FAULT_CLASS(code) != CALRT_FAULT_DEVICE) {
    return;
  }
  faulted_ = true;
  ++error_count_;
  last_error_ = code;
  faults_.note(level, persistent, cause);
}

void Device::note_latent_fault(uint32_t level, bool persistent, const std::string& cause) {
  faults_.note(level, persistent, cause);
}

void Device::lose_device(const std::string& cause) {
  if (lost_) {
    return;
  }
  lost_ = true;
  ++error_count_;
  last_error_ = CALRT_DEVICE_LOST;
  faults_.lose(cause);
  for (uint32_t c = 0; c < chip_count(); ++c) {
    stop_chip(c, CALRT_CHIP_FAILED, "lost (surprise removal during " + cause + ")");
  }
  fail_in_flight(CALRT_DEVICE_LOST, "the device was lost (surprise removal during " + cause + ")");
}

void Device::fail_in_flight(CalrtCode code, const std::string& why) {
  std::vector<ObjectId> live;
  jobs_.for_each([&](ObjectId id, const Job& job) {
    if (!job.final()) {
      live.push_back(id);
    }
  });
  for (ObjectId id : live) {
    Job& job = *jobs_.find(id);
    finish(job, CALRT_JOB_FAILED, code, job_label(job) + ": " + why);
  }
}

void Device::stop_chip(uint32_t chip, CalrtChipHealth health, std::string activity) {
  faults_.stop_chip(chip, health, std::move(activity));
}

// Plans built in code bypass parse_fault_plan's chip check: a chip the device does not have
// is left alone rather than indexed.
void Device::fail_job_now(Job& job, CalrtCode code, std::string message) {
  finish(job, CALRT_JOB_FAILED, code, std::move(message));
}

void Device::throttle_chip(uint32_t chip, TimePs until, uint32_t factor) {
  faults_.throttle_chip(chip, until, factor);
}

std::optional<std::string> Device::flip_kv_bit(const Job& job, uint32_t chip, uint64_t draw) {
  KvHandle* kv = job.kv.empty() ? nullptr : kvs_.find(job.kv.front());
  return kv != nullptr ? kv->store.flip_bit(chip, draw) : std::nullopt;
}

void Device::correct_ecc(uint32_t chip) { faults_.correct_ecc(chip); }

void Device::count_uncorrected(uint32_t chip) { faults_.count_uncorrected(chip); }

CalrtChipHealth Device::chip_health(uint32_t chip) const {
  return lost_ ? CALRT_CHIP_FAILED : faults_.health(chip, engine_.now());
}

std::string Device::chip_activity(uint32_t chip) const {
  const FaultState::ChipCondition& condition = faults_.chips()[chip];
  const auto& busy = stages_[static_cast<size_t>(Stage::kCompute)].busy;
  const Job* job = busy ? jobs_.find(*busy) : nullptr;
  if (condition.stopped || job == nullptr) {
    return condition.activity;
  }
  const size_t k = segment_at(job->cost.segments, engine_.now() - job->compute_start_ps);
  if (k >= job->cost.segments.size()) {
    return condition.activity;
  }
  return "computing " + describe_segment(job->cost.segments, k) + " of " + job_label(*job);
}

FaultSite Device::site_of(const Job& job) const {
  const CalbinImage* image = calbins_.find(job.calbin);
  if (image == nullptr || job.model_index >= image->manifest.models.size()) {
    return FaultSite::kPrefill;
  }
  switch (image->manifest.models[job.model_index].type) {
    case calbin::ModelType::kDecode:
      return FaultSite::kDecode;
    case calbin::ModelType::kKvUpdate:
      return FaultSite::kKvUpdate;
    default:
      return FaultSite::kPrefill;
  }
}

bool Device::inject_input_dma(Job& job, TimePs& duration) {
  (void)duration;  // a failing transfer still takes its time: the error comes at its end
  const FaultSite site = site_of(job);
  const std::string where =
      "the input DMA of " + job_label(job) + " (" + std::string(to_string(site)) + ")";
  for (const Injection& injection : inject(site, FaultPoint::kInputDma, job.serial)) {
    record_injection(injection, site, job.serial,
                     apply_dma_fault(injection, job, where, DmaDirection::kInput, *this));
  }
  return !job.final();
}

bool Device::inject_compute(Job& job, TimePs& duration) {
  const TimePs now = engine_.now();
  const FaultSite site = site_of(job);
  const std::string where =
      "the compute of " + job_label(job) + " (" + std::string(to_string(site)) + ")";
  std::vector<Segment>& segments = job.cost.segments;
  ComputeFaults gathered;
  for (const Injection& injection : inject(site, FaultPoint::kCompute, job.serial)) {
    record_injection(injection, site, job.serial,
                     apply_compute_fault(injection, job, now, where, *this, gathered));
  }
  const uint64_t slow = gathered.slow;
  const auto& hang = gathered.hang;
  const auto& link_down = gathered.link_down;
  if (job.final()) {
    return false;
  }

  // Slowness first, then throttling on the slowed timeline.
  if (slow > 1) {
    slow_down(segments, slow);
  }
  const std::vector<FaultState::ChipCondition>& chips = faults_.chips();
  std::vector<ChipThrottle> throttles(chips.size());
  for (size_t c = 0; c < chips.size(); ++c) {
    if (chips[c].throttled_until_ps > now) {
      throttles[c] = ChipThrottle{chips[c].throttle_factor, chips[c].throttled_until_ps};
    }
  }
  throttle(segments, now, throttles);
  faults_.set_activity("computing " + job_label(job));

  const TimePs watchdog = config_.job_watchdog_ms * kPsPerMs;
  const std::string watchdog_text = "the job watchdog (" + ms_text(watchdog) + ")";
  std::optional<TimePs> hang_at;
  std::optional<TimePs> link_at;
  if (hang) {
    hang_at = segment_start_ps(segments, hang->segment);
  }
  if (link_down) {
    const size_t k = link_down->segment;
    link_at = segments.empty()
                  ? 0
                  : saturating_add(segment_start_ps(segments, k), segments[k].chips_ps());
    const std::string cause = "the D2D link went down during " + where;
    note_latent_fault(CALRT_RESET_FULL, link_down->persistent, cause);
    job.latent_fault = true;
  }
  if (link_at && (!hang_at || *link_at < *hang_at) && *link_at < watchdog) {
    const std::string barrier =
        "the D2D barrier closing " + describe_segment(segments, link_down->segment);
    for (uint32_t c = 0; c < chip_count(); ++c) {
      stop_chip(c, CALRT_CHIP_DEGRADED, "waiting at " + barrier + ": the link is down");
    }
    job.stage_fault = Job::StageFault{CALRT_JOB_FAILED,
                                      CALRT_D2D_LINK_DOWN,
                                      CALRT_RESET_FULL,
                                      link_down->persistent,
                                      false,
                                      "the D2D reduction at " + barrier + " failed"};
    duration = *link_at;
    return true;
  }
  if (hang) {
    const std::string at = describe_segment(segments, hang->segment);
    const uint32_t level = hang->one_chip ? CALRT_RESET_CORES : CALRT_RESET_JOB_ABORT;
    std::string cause;
    if (hang->one_chip) {
      cause = "chip " + std::to_string(hang->chip) + " hung in " + at + " of " + job_label(job);
      for (uint32_t c = 0; c < chip_count(); ++c) {
        if (c == hang->chip) {
          stop_chip(c, CALRT_CHIP_HUNG, "hung in " + at);
        } else {
          stop_chip(c, CALRT_CHIP_OK, "waiting at the D2D barrier closing " + at);
        }
      }
    } else {
      cause = job_label(job) + " hung in " + at;
      for (uint32_t c = 0; c < chip_count(); ++c) {
        stop_chip(c, CALRT_CHIP_HUNG, "hung in " + at);
      }
    }
    note_latent_fault(level, hang->persistent, cause);
    job.latent_fault = true;
    job.stage_fault = Job::StageFault{CALRT_JOB_TIMED_OUT,
                                      CALRT_DEVICE_HUNG,
                                      level,
                                      hang->persistent,
                                      false,
                                      cause + "; " + watchdog_text + " ended it"};
    duration = watchdog;
    return true;
  }
  const TimePs compute = job.cost.compute_ps();
  if (compute > watchdog) {
    job.stage_fault = Job::StageFault{
        CALRT_JOB_TIMED_OUT,
        CALRT_DEVICE_HUNG,
        CALRT_RESET_JOB_ABORT,
        false,
        true,
        "its compute needs " + ms_text(compute) + ", past " + watchdog_text + ", which ended it"};
    duration = watchdog;
    return true;
  }
  duration = compute;
  return true;
}

bool Device::inject_output_dma(Job& job, TimePs& duration) {
  (void)duration;
  const FaultSite site = site_of(job);
  const std::string where =
      "the output DMA of " + job_label(job) + " (" + std::string(to_string(site)) + ")";
  for (const Injection& injection : inject(site, FaultPoint::kOutputDma, job.serial)) {
    record_injection(injection, site, job.serial,
                     apply_dma_fault(injection, job, where, DmaDirection::kOutput, *this));
  }
  return !job.final();
}

void Device::end_stage_with_fault(Job& job) {
  Job::StageFault fault = std::move(*job.stage_fault);
  job.stage_fault.reset();
  const std::string message = job_label(job) + ": " + fault.message;
  if (fault.watchdog) {
    const TimePs ran = engine_.now() - job.compute_start_ps;
    const std::string at = describe_segment(job.cost.segments, segment_at(job.cost.segments, ran));
    for (uint32_t c = 0; c < chip_count(); ++c) {
      stop_chip(c, CALRT_CHIP_HUNG, "stopped by the job watchdog in " + at);
    }
  }
  raise_device_fault(fault.code, fault.reset_level, fault.persistent, message);
  finish(job, fault.state, fault.code, message);
  pump();
}

Status Device::inject_kv(FaultPoint point, KvHandle* kv, const std::string& request) {
  KvFaults gathered;
  const KvBitFlip flip = [kv](uint32_t chip, uint64_t draw) -> std::optional<std::string> {
    return kv != nullptr ? kv->store.flip_bit(chip, draw) : std::nullopt;
  };
  for (const Injection& injection : inject(FaultSite::kKv, point, 0)) {
    record_injection(injection, FaultSite::kKv, 0,
                     apply_kv_fault(injection, request, flip, *this, gathered));
  }
  if (gathered.refusal) return fail(gathered.refusal->code, gathered.refusal->message);
  return {};
}

UploadFaults Device::inject_upload(const CalbinImage& image) {
  UploadFaults out;
  const std::string where = "the parameter upload of calbin #" + std::to_string(image.serial);
  for (const Injection& injection : inject(FaultSite::kConfigure, FaultPoint::kUpload, 0)) {
    record_injection(injection, FaultSite::kConfigure, 0,
                     apply_upload_fault(injection, where, *this, out));
  }
  return out;
}

Status Device::fail_upload(CalbinImage& image, const UploadFaults& faults) {
  std::string message = faults.failure->message;
  if (faults.failure->code == CALRT_ECC_UNCORRECTABLE && faults.ecc_chip) {
    const uint32_t chip = *faults.ecc_chip;
    if (chip < image.weights.size()) {
      message += " (" + flip_weight_bit(image.weights[chip], faults.ecc_draw) + " flipped)";
    }
    count_uncorrected(chip);
    stop_chip(chip, CALRT_CHIP_DEGRADED, message);
  } else if (faults.failure->code == CALRT_FIRMWARE_CRASH) {
    for (uint32_t c = 0; c < chip_count(); ++c) {
      stop_chip(c, CALRT_CHIP_HUNG, message);
    }
  }
  raise_device_fault(faults.failure->code, faults.failure_level, faults.failure_persistent,
                     message);
  return fail(faults.failure->code, message);
}

}  // namespace simdev
