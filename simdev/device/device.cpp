// Device core: creation, lookups, the state machine, status and parallel mode.
#include "simdev/device/device.hpp"

#include <algorithm>

namespace simdev {

Expected<std::unique_ptr<Device>> Device::create(std::string_view config_text) {
  auto config = parse_device_config(config_text);
  if (!config) {
    return tl::unexpected(config.error());
  }
  return std::make_unique<Device>(*config);
}

Device::Device(const DeviceConfig& config)
    : config_(config), faults_(config.chips), chip_busy_ps_(config.chips) {
  engine_.set_paced(config.clock == ClockMode::kPaced);
  engine_.invariants().set_strict(config.strict);
}

Status Device::host_spend(uint64_t duration_ns) {
  if (auto allowed = require_allowed(DeviceCall::kClockHostSpend); !allowed) {
    return allowed;
  }
  if (duration_ns == CALRT_TIMEOUT_INFINITE) {
    return fail(CALRT_INVALID_ARGUMENT, "host_spend duration_ns is CALRT_TIMEOUT_INFINITE");
  }
  if (engine_.paced()) {
    return engine_.catch_up();  // the time has passed already
  }
  return engine_.run_until(saturating_add(engine_.now(), ns_to_ps(duration_ns)),
                           [] { return false; });
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
                                                           DeviceCall call) const {
  if (auto allowed = require_allowed(call); !allowed) {
    return tl::unexpected(allowed.error());
  }
  auto found = find_calbin(calbin_id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  CalbinImage& image = **found;
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

Status Device::require_allowed(DeviceCall call) const {
  if (engine_.invariants().stopped()) {
    return fail(CALRT_INTERNAL, "the simulated device stopped at a broken invariant (strict): " +
                                    engine_.invariants().first_failure());
  }
  const CalrtDeviceState current = state();
  const CallVerdict verdict = call_verdict(call, current);
  if (verdict == CallVerdict::kAllowed) {
    return {};
  }
  std::string why;
  switch (current) {
    case CALRT_DEVICE_RUNNING:
      why = std::to_string(jobs_in_flight()) + " job(s) in flight; wait for or cancel them first";
      break;
    case CALRT_DEVICE_FAULTED:
      why = faults_.stuck() ? "a persistent fault: no reset clears it"
                            : std::string("reset it first, at level ") +
                                  reset_level_name(faults_.needs_reset()) + " or higher";
      break;
    case CALRT_DEVICE_RESETTING:
      why = "a reset is in progress";
      break;
    case CALRT_DEVICE_LOST_STATE:
      why = "gone for good; only status, diagnostics and releasing handles work";
      break;
    default:
      break;
  }
  if (!faults_.cause().empty() &&
      (current == CALRT_DEVICE_FAULTED || current == CALRT_DEVICE_LOST_STATE)) {
    why = faults_.cause() + "; " + why;
  }
  return fail(verdict_code(verdict), std::string(call_name(call)) + " is not allowed: device is " +
                                         device_state_name(current) +
                                         (why.empty() ? "" : " (" + why + ")"));
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

uint64_t Device::used_by_other_calbins(ObjectId self, uint32_t chip) const {
  uint64_t used = 0;
  calbins_.for_each([&](ObjectId id, const CalbinImage& image) {
    if (!(id == self) && image.configured && chip < image.memory_used_bytes.size()) {
      used += image.memory_used_bytes[chip];
    }
  });
  return used;
}

Status Device::set_parallel_mode(bool enable) {
  // RUNNING refuses it in the table: slots cannot change under jobs in flight.
  if (auto allowed = require_allowed(DeviceCall::kDeviceSetParallelMode); !allowed) {
    return allowed;
  }
  parallel_mode_ = enable;
  return {};
}

bool Device::set_job_state(Job& job, CalrtJobState to) {
  return move_job_state(job.state, to, state_machine_violations_);
}

}  // namespace simdev
