// Device core: creation, lookups, the state machine, status, reset and parallel mode.
#include "simdev/device/device.hpp"

#include <algorithm>

namespace simdev {
namespace {

const char* state_name(CalrtDeviceState state) {
  switch (state) {
    case CALRT_DEVICE_OPEN:
      return "OPEN";
    case CALRT_DEVICE_CONFIGURED:
      return "CONFIGURED";
    case CALRT_DEVICE_RUNNING:
      return "RUNNING";
    case CALRT_DEVICE_FAULTED:
      return "FAULTED";
    case CALRT_DEVICE_RESETTING:
      return "RESETTING";
    case CALRT_DEVICE_LOST_STATE:
      return "LOST";
    default:
      return "?";
  }
}

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

Expected<std::unique_ptr<Device>> Device::create(std::string_view config_text) {
  auto config = parse_device_config(config_text);
  if (!config) {
    return tl::unexpected(config.error());
  }
  return std::make_unique<Device>(*config);
}

Device::Device(const DeviceConfig& config)
    : config_(config), fault_plan_(std::make_unique<FaultPlan>()), chip_busy_ps_(config.chips) {
  engine_.set_paced(config.clock == ClockMode::kPaced);
}

Status Device::host_spend(uint64_t duration_ns) {
  if (duration_ns == CALRT_TIMEOUT_INFINITE) {
    return fail(CALRT_INVALID_ARGUMENT, "host_spend duration_ns is CALRT_TIMEOUT_INFINITE");
  }
  if (engine_.paced()) {
    return engine_.catch_up();  // the time has passed already
  }
  return engine_.run_until(saturating_add(engine_.now(), ns_to_ps(duration_ns)),
                           [] { return false; });
}

void Device::set_fault_plan(std::unique_ptr<FaultPlan> plan) {
  fault_plan_ = plan ? std::move(plan) : std::make_unique<FaultPlan>();
}

Expected<CalbinImage*> Device::find_calbin(ObjectId id) const {
  if (CalbinImage* image = calbins_.find(id)) {
    return image;
  }
  return fail(CALRT_INVALID_HANDLE,
              tombstones_.describe(id, "calbin handle was destroyed or never issued"));
}

Expected<Buffer*> Device::find_buffer(ObjectId id) const {
  if (Buffer* buffer = buffers_.find(id)) {
    return buffer;
  }
  return fail(CALRT_INVALID_HANDLE,
              tombstones_.describe(id, "buffer handle was destroyed or never issued"));
}

Expected<Job*> Device::find_job(ObjectId id) const {
  if (Job* found = jobs_.find(id)) {
    return found;
  }
  return fail(CALRT_INVALID_HANDLE,
              tombstones_.describe(id, "job handle was destroyed or never issued"));
}

Expected<KvHandle*> Device::find_kv(ObjectId id) const {
  if (KvHandle* kv = kvs_.find(id)) {
    return kv;
  }
  return fail(CALRT_INVALID_HANDLE,
              tombstones_.describe(id, "kv handle was freed or never issued"));
}

size_t Device::jobs_in_flight() const { return in_flight_; }

size_t Device::jobs_in_flight(ObjectId calbin) const {
  size_t count = 0;
  jobs_.for_each(
      [&](ObjectId, const Job& job) { count += job.calbin == calbin && !job.final() ? 1 : 0; });
  return count;
}

CalrtDeviceState Device::state() const {
  if (lost_) {
    return CALRT_DEVICE_LOST_STATE;
  }
  if (faulted_) {
    return CALRT_DEVICE_FAULTED;
  }
  if (jobs_in_flight() > 0) {
    return CALRT_DEVICE_RUNNING;
  }
  bool configured = false;
  calbins_.for_each([&](ObjectId, const CalbinImage& image) { configured |= image.configured; });
  return configured ? CALRT_DEVICE_CONFIGURED : CALRT_DEVICE_OPEN;
}

Expected<Device::ConfiguredModel> Device::configured_model(ObjectId calbin_id,
                                                           std::string_view model_name,
                                                           std::string_view call) const {
  auto found = find_calbin(calbin_id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  const CalbinImage& image = **found;
  if (auto usable = require_usable(call); !usable) {
    return tl::unexpected(usable.error());
  }
  const auto model_index = image.find_model(model_name);
  if (!model_index) {
    return fail(CALRT_NOT_FOUND, image.not_found_message(model_name));
  }
  if (!image.configured) {
    return fail(CALRT_NOT_CONFIGURED,
                "calbin #" + std::to_string(image.serial) + " is not configured");
  }
  return ConfiguredModel{&image, *model_index};
}

Status Device::require_usable(std::string_view call) const {
  const CalrtDeviceState current = state();
  if (current == CALRT_DEVICE_FAULTED || current == CALRT_DEVICE_LOST_STATE ||
      current == CALRT_DEVICE_RESETTING) {
    return fail(CALRT_WRONG_STATE,
                std::string(call) + " is not allowed: device is " + state_name(current) +
                    (current == CALRT_DEVICE_FAULTED ? " (reset it first)" : ""));
  }
  return {};
}

TimePs Device::timeout_ps(uint64_t timeout_ns) const {
  if (timeout_ns == CALRT_TIMEOUT_DEFAULT) {
    return config_.default_timeout_ms * kPsPerMs;
  }
  return timeout_ns == CALRT_TIMEOUT_INFINITE ? kTimeNever : ns_to_ps(timeout_ns);
}

DeviceStatus Device::status() const {
  DeviceStatus s;
  s.state = state();
  s.chip_count = static_cast<uint32_t>(config_.chips);
  s.parallel_mode = parallel_mode_;
  s.error_count = error_count_;
  s.reset_count = reset_count_;
  s.now_ps = engine_.now();
  s.last_error = last_error_;
  return s;
}

Expected<ChipStatus> Device::chip_status(uint32_t chip) const {
  if (chip >= config_.chips) {
    return fail(CALRT_OUT_OF_RANGE,
                "chip " + std::to_string(chip) + " >= chip_count " + std::to_string(config_.chips));
  }
  ChipStatus s;
  s.health = lost_ ? CALRT_CHIP_FAILED : (faulted_ ? CALRT_CHIP_HUNG : CALRT_CHIP_OK);
  s.dram_total_bytes = config_.dram_usable_bytes();
  s.dram_used_bytes = used_by_other_calbins(ObjectId{}, chip);
  s.busy_ps = chip_busy_ps_[chip];
  return s;
}

uint64_t Device::used_by_other_calbins(ObjectId self, uint32_t chip) const {
  uint64_t used = 0;
  calbins_.for_each([&](ObjectId id, const CalbinImage& image) {
    if (!(id == self) && image.configured && chip < image.memory_used_bytes.size()) {
      used += image.memory_used_bytes[chip];
    }
  });
  return used;
}

Expected<CalrtDeviceState> Device::reset(CalrtResetLevel level, uint64_t timeout_ns) {
  if (level < CALRT_RESET_JOB_ABORT || level > CALRT_RESET_FULL) {
    return fail(CALRT_INVALID_ARGUMENT, "reset level " + std::to_string(level) + " is unknown");
  }
  if (lost_) {
    return fail(CALRT_DEVICE_LOST, "device is LOST; it cannot be reset");
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
    engine_.advance_to(saturating_add(engine_.now(), limit));
    faulted_ = true;
    return fail(CALRT_DEVICE_HUNG, "reset level " + std::to_string(level) + " needs " +
                                       std::to_string(ps_to_ns(duration)) + " ns > timeout " +
                                       std::to_string(ps_to_ns(limit)) + " ns");
  }
  engine_.advance_to(saturating_add(engine_.now(), duration));
  faulted_ = false;
  return state();
}

Status Device::set_parallel_mode(bool enable) {
  if (auto usable = require_usable("SetParallelMode"); !usable) {
    return usable;
  }
  if (jobs_in_flight() > 0) {
    return fail(CALRT_WRONG_STATE, "SetParallelMode needs an idle device; " +
                                       std::to_string(jobs_in_flight()) + " jobs in flight");
  }
  parallel_mode_ = enable;
  return {};
}

}  // namespace simdev
