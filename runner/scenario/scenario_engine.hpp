// One run of a scenario's steps on a fresh device with a fault plan, under the runner's
// recovery policy (scenarios/README.md), and everything the run produced: the actual
// outcome, per-sequence verdicts, device time, hang reports, fault hits and what the
// invariants need (leaks, state machine violations, the longest calls).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "abi/calrt_ext.hpp"
#include "runner/core/device/calbin_cache.hpp"
#include "runner/core/device/device_select.hpp"
#include "runner/scenario/scenario_file.hpp"

namespace runner {

struct SequenceVerdict {
  std::string name;
  bool ok = true;
  bool mismatch = false;  // failed because an output did not match golden
  std::string why;        // the first reason it failed
  // Outputs whose argmax was the golden greedy token, of those compared (replays included).
  uint64_t greedy_agree = 0;
  uint64_t greedy_total = 0;
};

// What came out, in the words of a scenario's `expect`.
struct RunActual {
  Outcome outcome = Outcome::pass;
  CalrtCode first_error = CALRT_OK;
  std::string device_state = "?";  // at the end of the steps, before teardown
  std::optional<calrt::ResetLevel> recovered_by;
  uint64_t resets = 0;
  double max_call_ms = 0.0;
  std::vector<SequenceVerdict> sequences;  // in order of first use
};

struct RunRecord {
  std::string plan;  // the YAML handed to the device
  RunActual actual;
  std::optional<uint64_t> state_hash;  // before teardown; none without the diag extension
  std::vector<nlohmann::json> hang_reports;
  double device_ms = 0.0;  // device time the steps took
  uint64_t calls = 0;      // measured ABI calls
  double longest_reset_ms = 0.0;
  std::vector<calrt::FaultHit> hits;  // of this run's device; empty without the extension
  // After teardown (not when LOST): the diag report's live object counts, summed.
  std::optional<uint64_t> live_after_teardown;
  std::string live_detail;  // the "live" object as JSON text
  std::optional<uint64_t> state_machine_violations;
  // The engine could not do what was asked (a setup failure, no fault extension, an
  // unexpected exception): the run fails whatever its outcome.
  std::vector<std::string> engine_errors;
  std::vector<std::string> events;  // what the runner saw and did, in order
};

struct RunSpec {
  const Scenario* scenario = nullptr;  // steps, timeout_ms, max_recoveries, device overrides
  uint64_t seed = 1;
  std::vector<FaultEntry> faults;  // handed to the device as plan_yaml(seed, faults)
  PolicyBug bug = PolicyBug::none;
  const ScenarioCalbin* calbin = nullptr;
  const DeviceSpec* device = nullptr;  // backend; its config is replaced by the scenario's
  const calrt::Api* api = nullptr;
};

// The Device_Create option string of a scenario: "seed=S" then its overrides.
std::string device_config(const Scenario& scenario, uint64_t seed);

// Runs the steps; never throws.
RunRecord run_scenario_steps(const RunSpec& spec);

}  // namespace runner
