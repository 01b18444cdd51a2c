#include "simdev/device/faults/compute_faults.hpp"

#include <algorithm>

namespace simdev {
namespace {

size_t clamped_segment(const Job& job, size_t segment) {
  const size_t count = job.cost.segments.size();
  return std::min<size_t>(segment, count == 0 ? 0 : count - 1);
}

// The arguments every kind's effect gets.
struct At {
  const Injection& injection;
  const FaultSpec& spec;
  Job& job;
  TimePs now;
  const std::string& where;
  FaultEffects& device;
  ComputeFaults& gathered;
};

std::string ecc_correctable(const At& at) {
  at.device.correct_ecc(at.spec.chip);
  return "chip " + std::to_string(at.spec.chip) + " corrected an ECC error";
}

std::string device_lost(const At& at) {
  at.device.lose_device(at.where);
  return "the device is lost";
}

std::string firmware_crash(const At& at) {
  const std::string why = "the firmware crashed during " + at.where;
  for (uint32_t c = 0; c < at.device.chip_count(); ++c) {
    at.device.stop_chip(c, CALRT_CHIP_HUNG, "firmware crashed during " + at.where);
  }
  at.device.raise_device_fault(CALRT_FIRMWARE_CRASH, CALRT_RESET_CHIP, at.spec.persistent, why);
  at.device.fail_in_flight(CALRT_FIRMWARE_CRASH, why);
  return "the firmware crashed; every in-flight job failed";
}

std::string ecc_uncorrectable(const At& at) {
  const uint32_t chip = at.spec.chip;
  const std::optional<std::string> flipped = at.device.flip_kv_bit(at.job, chip, at.injection.draw);
  const std::string what = "uncorrectable ECC error on chip " + std::to_string(chip) +
                           " in the KV of " + job_label(at.job) +
                           (flipped ? " (" + *flipped + " flipped)" : " (no KV contents)");
  at.device.count_uncorrected(chip);
  at.device.stop_chip(chip, CALRT_CHIP_DEGRADED, what);
  at.device.raise_device_fault(CALRT_ECC_UNCORRECTABLE, CALRT_RESET_CHIP, at.spec.persistent, what);
  at.device.fail_job_now(at.job, CALRT_ECC_UNCORRECTABLE, job_label(at.job) + ": " + what);
  return what;
}

std::string job_hang(const At& at) {
  const std::vector<Segment>& segments = at.job.cost.segments;
  if (!at.gathered.hang) {
    const size_t k = segments.empty() ? 0 : at.injection.draw % segments.size();
    at.gathered.hang = ComputeFaults::Stall{false, 0, k, at.spec.persistent};
  }
  return "the job hangs in " + describe_segment(segments, at.gathered.hang->segment);
}

std::string chip_hang(const At& at) {
  const size_t segment = clamped_segment(at.job, at.spec.segment);
  if (!at.gathered.hang) {
    at.gathered.hang = ComputeFaults::Stall{true, at.spec.chip, segment, at.spec.persistent};
  }
  return "chip " + std::to_string(at.spec.chip) + " hangs in " +
         describe_segment(at.job.cost.segments, segment);
}

std::string d2d_link_down(const At& at) {
  const size_t segment = clamped_segment(at.job, at.spec.segment);
  if (!at.gathered.link_down) {
    at.gathered.link_down = ComputeFaults::LinkDown{segment, at.spec.persistent};
  }
  return "the D2D link is down at the reduction closing " +
         describe_segment(at.job.cost.segments, segment);
}

std::string thermal_throttle(const At& at) {
  const TimePs duration = fault_duration_ps(at.spec);
  at.device.throttle_chip(at.spec.chip, saturating_add(at.now, duration), fault_factor(at.spec));
  return "chip " + std::to_string(at.spec.chip) + " throttled x" +
         std::to_string(fault_factor(at.spec)) + " for " + std::to_string(duration / kPsPerUs) +
         " us";
}

std::string slow_completion(const At& at) {
  at.gathered.slow = saturating_mul(at.gathered.slow, fault_factor(at.spec));
  return "the compute takes x" + std::to_string(fault_factor(at.spec)) + " longer";
}

}  // namespace

std::string describe_segment(const std::vector<Segment>& segments, size_t index) {
  if (segments.empty()) {
    return "its compute (no segments)";
  }
  const size_t k = std::min(index, segments.size() - 1);
  const Segment& segment = segments[k];
  std::string text = "segment " + std::to_string(k) + " (" + segment.label;
  if (segment.layer >= 0) {
    text += ", layer " + std::to_string(segment.layer);
  }
  return text + ")";
}

std::string apply_compute_fault(const Injection& injection, Job& job, TimePs now,
                                const std::string& where, FaultEffects& device,
                                ComputeFaults& gathered) {
  const std::string prefix = where + ": ";
  // A job that has ended is past harm, except for what happens to the device and its chips.
  if (job.final() && injection.kind != FaultKind::kDeviceLost &&
      injection.kind != FaultKind::kEccCorrectable) {
    return prefix + "no effect: the job had ended";
  }
  const At at{injection, *injection.spec, job, now, where, device, gathered};
  switch (injection.kind) {
    case FaultKind::kEccCorrectable:
      return prefix + ecc_correctable(at);
    case FaultKind::kDeviceLost:
      return prefix + device_lost(at);
    case FaultKind::kFirmwareCrash:
      return prefix + firmware_crash(at);
    case FaultKind::kEccUncorrectable:
      return prefix + ecc_uncorrectable(at);
    case FaultKind::kJobHang:
      return prefix + job_hang(at);
    case FaultKind::kChipHang:
      return prefix + chip_hang(at);
    case FaultKind::kD2dLinkDown:
      return prefix + d2d_link_down(at);
    case FaultKind::kThermalThrottle:
      return prefix + thermal_throttle(at);
    case FaultKind::kSlowCompletion:
      return prefix + slow_completion(at);
    default:
      return prefix + "no effect at this operation";
  }
}

}  // namespace simdev
