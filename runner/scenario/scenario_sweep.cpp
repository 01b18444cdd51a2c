#include "runner/scenario/scenario_sweep.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstdio>

#include "runner/scenario/scenario_checks.hpp"

namespace runner {
namespace {

// A failing (kind, mode) names its first few failing runs; the JSON has them all.
constexpr size_t kFailuresShown = 3;

uint64_t hits_of(const std::vector<calrt::FaultHit>& hits, const std::string& kind) {
  uint64_t sum = 0;
  for (const calrt::FaultHit& hit : hits) {
    sum += hit.kind == kind ? hit.count : 0;
  }
  return sum;
}

SweepResult sweep_one(ScenarioContext& context, const Scenario& scenario, const SweepSpec& sweep,
                      uint64_t seed, const std::string& kind, SweepMode mode) {
  SweepResult result;
  result.name = scenario.name;
  result.file = scenario.file;
  result.fault_kind = kind;
  result.mode = mode;
  result.seed = seed;
  result.bug = context.bug;
  result.replay =
      replay_command(fmt::format("--sweep {} --seed {}", scenario.file, seed), context.bug);
  size_t failing = 0;
  for (uint32_t at_op = 1; at_op <= sweep.max_runs; ++at_op) {
    FaultEntry fault;
    fault.fields = {{"kind", kind}, {"at_op", std::to_string(at_op)}};
    if (mode == SweepMode::persistent) {
      fault.fields.emplace_back("persistent", "true");
    }
    const std::vector<FaultEntry> faults = {fault};
    const RunRecord record = context.run(scenario, seed, faults);
    SweepRun run;
    run.at_op = at_op;
    run.outcome = record.actual.outcome;
    run.injected = hits_of(record.hits, kind) > 0;
    InvariantContext invariants;
    invariants.timeout_ms = scenario.timeout_ms;
    invariants.bug = context.bug;
    invariants.corruption_planned = kind == "corrupted_output";
    run.problems = invariant_violations(record, invariants);
    if (std::find(sweep.allowed.begin(), sweep.allowed.end(), run.outcome) == sweep.allowed.end()) {
      run.problems.push_back(fmt::format("outcome {} is not allowed", to_string(run.outcome)));
    }
    if (!run.problems.empty()) {
      if (failing < kFailuresShown) {
        result.failures.push_back(fmt::format("at_op {}: {} (plan {})", at_op,
                                              fmt::join(run.problems, ", "),
                                              plan_yaml(seed, faults)));
      } else if (failing == kFailuresShown) {
        result.failures.push_back("further failing runs in the JSON report");
      }
      ++failing;
    }
    result.runs.push_back(std::move(run));
    if (!result.runs.back().injected) {
      break;  // past the last eligible operation: every later at_op would be the same run
    }
  }
  return result;
}

}  // namespace

std::vector<SweepResult> run_sweep(ScenarioContext& context, const Scenario& scenario,
                                   const SweepSpec& sweep, uint64_t seed,
                                   const std::vector<calrt::FaultHit>& offered) {
  std::vector<std::string> kinds = sweep.kinds;
  if (kinds.empty()) {
    for (const calrt::FaultHit& hit : offered) {
      if (std::find(kinds.begin(), kinds.end(), hit.kind) == kinds.end()) {
        kinds.push_back(hit.kind);
      }
    }
  }
  std::vector<SweepResult> results;
  for (const std::string& kind : kinds) {
    for (const SweepMode mode : sweep.modes) {
      results.push_back(sweep_one(context, scenario, sweep, seed, kind, mode));
      std::fputs(sweep_lines(results.back()).c_str(), stdout);
      std::fflush(stdout);
    }
  }
  return results;
}

}  // namespace runner
