// State shared by the steps of one smoke run. Members are declared in creation order, so
// they are destroyed children first (buffers, calbin, device, then the runtime table).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "abi/calrt.hpp"
#include "llm/model_binding.hpp"
#include "runner/core/baseline.hpp"
#include "runner/core/device/device_select.hpp"
#include "runner/core/host_inputs.hpp"
#include "runner/core/metrics.hpp"
#include "runner/core/report/report.hpp"
#include "runner/core/session_options.hpp"

namespace runner {

// One model as the smoke drives it: the adapter's binding of its tensors and CSRs
// (llm/model_binding.hpp) and its input/output buffers.
struct ModelIo : calrt::llm::ModelBinding {
  calrt::Buffer input;
  calrt::Buffer output;
};

struct Session {
  explicit Session(const SmokeOptions& smoke_options) : options(smoke_options) {}

  const SmokeOptions& options;
  DeviceSpec device_spec;
  HostInputs inputs;
  std::optional<Baseline> baseline;  // --baseline, read and matched to the golden set
  calrt::Api api;
  calrt::Device device;
  uint32_t chip_count = 0;
  calrt::Calbin calbin;
  std::vector<calrt::Calbin> residents;  // --resident, configured before `calbin`
  calrt::CalbinInfo info;
  ModelIo prefill;
  ModelIo decode;
  bool models_ok = false;  // step 2 found both models with the expected I/O
  bool configured = false;
  bool buffers_ok = false;

  calrt::Timeout timeout() const { return std::chrono::milliseconds(options.timeout_ms); }
};

// Steps of the smoke; each returns its result and never throws (runtime errors become
// failures naming the code and fault class).
StepResult step_device(Session& session);     // 1
StepResult step_calbin(Session& session);     // 2
StepResult step_configure(Session& session);  // 3
StepResult step_buffers(Session& session);    // 4
// Steps 5 (inputs and CSRs), 6 (prefill) and 7 (decode) over the golden cases; fills the
// report's metrics.
std::vector<StepResult> steps_golden(Session& session, nlohmann::json& metrics);
StepResult step_kv(Session& session);  // 8
// For a calbin with batch > 1: the golden cases decoded a batch at a time, a sequence per row
// (10).
// With --resident: the resident calbins are still configured after the run (9).
StepResult step_residents(Session& session);
StepResult step_batch(Session& session);

// The bodies of steps 2 and 4 for callers with their own error handling (the scenarios):
// they throw calrt::Error from the runtime and add I/O mismatches to `step`.
void load_calbin_models(Session& session, StepResult& step);
void create_model_buffers(Session& session, StepResult& step);

// One job of `io`'s model, submitted and waited for within the session's timeout. `failure`
// is empty when it completed; otherwise it says what happened, for a failure line (a job
// still running at the timeout is cancelled first).
struct FinishedJob {
  calrt::Job job;
  calrt::JobStatus status;
  std::string failure;
};
FinishedJob run_model_job(Session& session, ModelIo& io);

// Checks a model's I/O against what the runner expects from the LLM info; adds one failure
// per mismatch naming model, tensor, field, expected and actual (session_expect.cpp). A
// decode that ranks on the device sets io.top_k and its two outputs instead of the logits.
void check_model_io(const calrt::CalbinInfo& info, ModelIo& io, calrt::ModelType type,
                    StepResult& step);

// Runs one step's body with a stopwatch; an exception (a calrt::Error names its function,
// code and fault class in what()) becomes a failure of the step instead of ending the run.
template <class Body>
StepResult run_guarded(int number, const char* name, Body&& body) {
  StepResult step;
  step.number = number;
  step.name = name;
  const Stopwatch stopwatch;
  try {
    body(step);
  } catch (const std::exception& error) {
    step.fail(error.what());
  }
  step.wall_ms = stopwatch.elapsed_ms();
  return step;
}

}  // namespace runner
