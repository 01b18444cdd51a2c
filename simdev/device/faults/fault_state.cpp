#include "simdev/device/faults/fault_state.hpp"

#include <algorithm>

namespace simdev {

std::vector<FaultHitCount> FaultState::hits() const {
  std::vector<FaultHitCount> hits;
  for (size_t k = 0; k < kFaultKindCount; ++k) {
    for (size_t s = 0; s < kFaultSiteCount; ++s) {
      const auto kind = static_cast<FaultKind>(k);
      const auto site = static_cast<FaultSite>(s);
      if (can_happen(kind, site)) {
        hits.push_back(FaultHitCount{kind, site, hit_counts_[k][s]});
      }
    }
  }
  return hits;
}

std::vector<Injection> FaultState::inject(const FaultOperation& operation) {
  std::vector<Injection> fired = injector_.at(operation);
  for (const Injection& injection : fired) {
    ++hit_counts_[static_cast<size_t>(injection.kind)][static_cast<size_t>(operation.site)];
  }
  return fired;
}

void FaultState::record(const Injection& injection, FaultSite site, uint64_t job_serial, TimePs at,
                        std::string detail) {
  if (injections_.size() >= kMaxInjectionRecords) {
    injections_.erase(injections_.begin());
  }
  injections_.push_back(InjectionRecord{injection.kind, site, job_serial, at, std::move(detail)});
}

void FaultState::note(uint32_t level, bool persistent, const std::string& cause) {
  needs_reset_ = std::max(needs_reset_, level);
  stuck_ = stuck_ || persistent;
  if (cause_.empty()) {
    cause_ = cause;
  }
}

bool FaultState::self_test(uint32_t level) {
  for (ChipCondition& chip : chips_) {
    chip.ecc_corrected_since_reset = 0;
  }
  if (stuck_ || level < needs_reset_) {
    return false;  // a broken part, or a reset too weak for the fault
  }
  needs_reset_ = 0;
  cause_.clear();
  for (ChipCondition& chip : chips_) {
    chip.health = CALRT_CHIP_OK;
    chip.activity = "idle";
    chip.stopped = false;
    // Thermal throttling is physics, not state: it lasts until throttled_until_ps.
  }
  return true;
}

CalrtChipHealth FaultState::health(uint32_t chip, TimePs now) const {
  const ChipCondition& condition = chips_[chip];
  if (condition.health != CALRT_CHIP_OK) {
    return condition.health;
  }
  const bool throttled = condition.throttled_until_ps > now;
  return condition.ecc_corrected_since_reset > 0 || throttled ? CALRT_CHIP_DEGRADED : CALRT_CHIP_OK;
}

void FaultState::stop_chip(uint32_t chip, CalrtChipHealth health, std::string activity) {
  if (chip >= chips_.size()) {
    return;
  }
  ChipCondition& condition = chips_[chip];
  if (condition.health == CALRT_CHIP_FAILED ||
      (condition.health == CALRT_CHIP_HUNG && health != CALRT_CHIP_FAILED)) {
    return;
  }
  condition.health = health;
  condition.activity = std::move(activity);
  condition.stopped = true;
}

void FaultState::throttle_chip(uint32_t chip, TimePs until, uint32_t factor) {
  if (chip < chips_.size()) {
    chips_[chip].throttled_until_ps = until;
    chips_[chip].throttle_factor = factor;
  }
}

void FaultState::correct_ecc(uint32_t chip) {
  if (chip < chips_.size()) {
    ++chips_[chip].ecc_corrected;
    ++chips_[chip].ecc_corrected_since_reset;
  }
}

void FaultState::count_uncorrected(uint32_t chip) {
  if (chip < chips_.size()) {
    ++chips_[chip].ecc_uncorrected;
  }
}

void FaultState::set_activity(const std::string& activity) {
  for (ChipCondition& condition : chips_) {
    if (!condition.stopped) {
      condition.activity = activity;
    }
  }
}

}  // namespace simdev
