// Device health: the reset levels, the self-test after a reset, and per-chip status.
#include "simdev/device/device.hpp"

namespace simdev {
namespace {

// Device time each reset level takes before its self-test passes (assumed values).
TimePs reset_duration_ps(CalrtResetLevel level) {
  switch (level) {
    case CALRT_RESET_JOB_ABORT:
      return 10 * kPsPerUs;
    case CALRT_RESET_CORES:
      return 1 * kPsPerMs;
    case CALRT_RESET_CHIP:
      return 50 * kPsPerMs;
    default:
      return 200 * kPsPerMs;
  }
}

}  // namespace

Expected<ChipStatus> Device::chip_status(uint32_t chip) const {
  if (auto allowed = require_allowed(DeviceCall::kDeviceChipStatus); !allowed) {
    return tl::unexpected(allowed.error());
  }
  if (chip >= config_.chips) {
    return fail(CALRT_OUT_OF_RANGE,
                "chip " + std::to_string(chip) + " >= chip_count " + std::to_string(config_.chips));
  }
  ChipStatus s;
  s.health = chip_health(chip);
  s.ecc_corrected = faults_.chips()[chip].ecc_corrected;
  s.ecc_uncorrected = faults_.chips()[chip].ecc_uncorrected;
  s.dram_total_bytes = config_.dram_usable_bytes();
  s.dram_used_bytes = used_by_other_calbins(ObjectId{}, chip);
  s.busy_ps = chip_busy_ps_[chip];
  return s;
}

Expected<CalrtDeviceState> Device::reset(CalrtResetLevel level, uint64_t timeout_ns) {
  if (auto allowed = require_allowed(DeviceCall::kDeviceReset); !allowed) {
    return tl::unexpected(allowed.error());
  }
  if (level < CALRT_RESET_JOB_ABORT || level > CALRT_RESET_FULL) {
    return fail(CALRT_INVALID_ARGUMENT, "reset level " + std::to_string(level) + " is unknown");
  }
  cancel_all("cancelled by device reset (level " + std::to_string(level) + ")");
  if (level >= CALRT_RESET_CHIP) {
    calbins_.for_each([&](ObjectId id, CalbinImage& image) { unconfigure(id, image); });
    if (level == CALRT_RESET_FULL) {
      parallel_mode_ = false;
    }
  }
  const TimePs duration = reset_duration_ps(level);
  const TimePs limit = timeout_ps(timeout_ns);
  ++reset_count_;
  if (duration > limit) {
    // Interrupted before its self-test: the same reset, given the time, is what clears it.
    engine_.advance_to(saturating_add(engine_.now(), limit));
    const std::string why = "reset level " + std::string(reset_level_name(level)) + " needs " +
                            std::to_string(ps_to_ns(duration)) + " ns > timeout " +
                            std::to_string(ps_to_ns(limit)) + " ns";
    raise_device_fault(CALRT_DEVICE_HUNG, level, false, why);
    return fail(CALRT_DEVICE_HUNG, why);
  }
  engine_.advance_to(saturating_add(engine_.now(), duration));
  // A broken part, or a reset too weak for the fault: still FAULTED.
  faulted_ = !faults_.self_test(static_cast<uint32_t>(level));
  return state();
}

}  // namespace simdev
