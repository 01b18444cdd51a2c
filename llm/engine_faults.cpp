// Faults by class. A request fault ends the requests it touched. A model fault stops the
// calbin: every request is answered and no new work is taken. A device fault answers every
// admitted request with a retryable device error, then resets the device up the ladder
// job_abort -> cores -> chip -> full until its self-test passes (the levels of calrt.h's
// Device_Reset, in the order of scenarios/README.md's recovery policy), opens it again if it
// was lost, and loads the calbin again; queued requests then run on the recovered device.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include "llm/engine_impl.hpp"

namespace calrt::llm {
namespace {

// A reset's own bound: the longest level takes far longer than a decode step.
constexpr std::chrono::milliseconds kResetTimeout{1000};

// The device answers, is OPEN or CONFIGURED, and every chip is OK or DEGRADED.
bool self_test(const calrt::Device& device) {
  try {
    const calrt::DeviceStatus status = device.status();
    if (status.state != calrt::DeviceState::open &&
        status.state != calrt::DeviceState::configured) {
      return false;
    }
    for (uint32_t chip = 0; chip < status.chip_count; ++chip) {
      const calrt::ChipHealth health = device.chip_status(chip).health;
      if (health != calrt::ChipHealth::ok && health != calrt::ChipHealth::degraded) return false;
    }
    return true;
  } catch (const calrt::Error&) {
    return false;
  }
}

}  // namespace

Error Engine::Impl::classify(const calrt::Error& error, std::string_view where) const {
  return reclassify(from_runtime(error, where));
}

Error Engine::Impl::reclassify(Error mapped) const {
  if (mapped.kind != ErrorKind::request || mapped.runtime_code != CALRT_WRONG_STATE) {
    return mapped;
  }
  try {
    const calrt::DeviceState state = device.status().state;
    if (state == calrt::DeviceState::open || state == calrt::DeviceState::configured ||
        state == calrt::DeviceState::running) {
      return mapped;
    }
    return device_error(mapped.message + " (device " + calrt::to_string(state) + ")",
                        mapped.runtime_code);
  } catch (const calrt::Error& status_error) {
    return from_runtime(status_error, "Device_Status after WRONG_STATE");
  }
}

void Engine::Impl::pop_oldest() {
  Flight& flight = flights.front();
  flight.job = calrt::Job();  // Job_Destroy (errors discarded: the job is final or lost)
  for (Live* live : flight.rows) {
    live->in_flight = false;
    ledger_of(*live).add(&Ledger::jobs_in_flight, -1);
  }
  flights.pop_front();
}

void Engine::Impl::release_flights() {
  for (Flight& flight : flights) {
    if (flight.job) {
      try {
        flight.job.cancel();
      } catch (const calrt::Error&) {
        // Final already, or the device is gone: destroying it below is all that is left.
      }
    }
  }
  while (!flights.empty()) pop_oldest();
}

void Engine::Impl::fail_rows(const std::vector<Live*>& rows, const Error& error) {
  if (error.kind == ErrorKind::device) {
    device_fault(error);
  } else if (error.kind == ErrorKind::model) {
    model_fault(error);
  } else {
    for (Live* live : rows) {
      if (live->id != 0) finish(*live, error);
    }
  }
}

void Engine::Impl::model_fault(const Error& error) {
  spdlog::warn("calbin {}: model fault, no new work: {}", config.calbin.string(),
               error.to_string());
  release_flights();
  std::deque<std::unique_ptr<Live>> queued;
  {
    const std::lock_guard lock(mutex);
    model_available = false;
    queued.swap(queue);
  }
  for (auto& live : active) {
    if (live->id != 0) finish(*live, error);
  }
  for (auto& live : queued) {
    finish(*live, model_error(ErrorCode::model_unavailable,
                              "the calbin stopped after a model fault: " + error.message));
  }
}

void Engine::Impl::device_fault(const Error& error) {
  spdlog::warn("device fault, resetting: {}", error.to_string());
  ++stats.device_faults;
  release_flights();
  Error answer = error;
  answer.kind = ErrorKind::device;
  answer.code = ErrorCode::device_fault;
  for (auto& live : active) {
    if (live->id != 0) finish(*live, answer);
  }
  if (recover()) {
    ++stats.recoveries;
    return;
  }
  std::deque<std::unique_ptr<Live>> queued;
  {
    const std::lock_guard lock(mutex);
    queued.swap(queue);
  }
  for (auto& live : queued) finish(*live, *down);
}

bool Engine::Impl::recover() {
  // Everything on the device goes first: the requests' KV went with finish(), now the
  // buffers and the calbin, so that no handle outlives the state a reset drops.
  stats.buffers_alive -= static_cast<int64_t>(4 * slots.size());
  slots.clear();
  calbin = calrt::Calbin();
  bool recovered = false;
  for (const calrt::ResetLevel level : {calrt::ResetLevel::job_abort, calrt::ResetLevel::cores,
                                        calrt::ResetLevel::chip, calrt::ResetLevel::full}) {
    try {
      device.reset(level, kResetTimeout);
    } catch (const calrt::Error& error) {
      if (error.code() == CALRT_DEVICE_LOST) break;  // no level helps: open it again below
      continue;
    }
    if (self_test(device)) {
      recovered = true;
      break;
    }
  }
  if (!recovered) {
    device = calrt::Device();  // Device_Destroy of the lost or unrecoverable device
    try {
      const DeviceSource& d = config.device;
      device = calrt::Device::create(d.api, d.kind, d.index, d.config, config.call_timeout);
    } catch (const calrt::Error& error) {
      const std::lock_guard lock(mutex);
      down = device_error(
          "the device could not be opened again after a fault: " + std::string(error.what()),
          error.code());
      return false;
    }
  }
  if (auto loaded = load(); !loaded) {
    const std::lock_guard lock(mutex);
    down = device_error(
        "the calbin could not be loaded again after a device fault: " + loaded.error().to_string(),
        loaded.error().runtime_code);
    return false;
  }
  return true;
}

}  // namespace calrt::llm
