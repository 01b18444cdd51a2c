// What makes one run pass: a scenario's expectations, and the invariants every run must
// hold whatever its faults (campaigns and sweeps check only those). Each problem is one
// sentence naming the field, what was expected and what happened.
#pragma once

#include <string>
#include <vector>

#include "runner/scenario/scenario_engine.hpp"

namespace runner {

// Expected vs actual for every field `expect` gives.
std::vector<std::string> expectation_mismatches(const Expect& expect, const RunActual& actual);

// What holds for every run: the engine did what was asked, nothing is alive after teardown
// (unless the device is lost), the device's state machine was never violated.
std::vector<std::string> run_problems(const RunRecord& record);

struct InvariantContext {
  uint32_t timeout_ms = 0;
  bool corruption_planned = false;  // the plan holds corrupted_output
  PolicyBug bug = PolicyBug::none;
};

// The campaign invariants on top of run_problems: every call returned within the timeout
// plus the longest reset, and no sequence failed by a golden mismatch unless the plan
// corrupts outputs (or a policy bug is active).
std::vector<std::string> invariant_violations(const RunRecord& record, const InvariantContext& c);

// "none" or the level's name.
std::string level_name(const std::optional<calrt::ResetLevel>& level);

}  // namespace runner
