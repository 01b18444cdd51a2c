// What `calrt scenario` prints and writes: one line per scenario, plan or sweep, the
// coverage table, and the JSON report (schema calrt-scenario/1, runner/README.md). Nothing
// here reads a clock or a path the user did not give, so two runs print the same bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/scenario/scenario_engine.hpp"

namespace runner {

inline constexpr const char* kScenarioSchema = "calrt-scenario/1";

struct RunResult {
  std::string kind;  // "scenario" or "plan"
  std::string name;
  std::string file;  // as given; empty for campaign plans
  std::string description;
  uint64_t seed = 0;
  PolicyBug bug = PolicyBug::none;
  std::optional<Expect> expect;
  std::vector<PolicyBug> negative_controls;
  RunRecord record;
  std::vector<std::string> mismatches;  // every expectation or invariant that did not hold
  std::string replay;                   // the command that replays this run alone

  bool passed() const { return mismatches.empty(); }
};

struct SweepRun {
  uint32_t at_op = 0;
  Outcome outcome = Outcome::pass;
  bool injected = false;
  std::vector<std::string> problems;
};

struct SweepResult {
  std::string name;
  std::string file;
  std::string fault_kind;
  SweepMode mode = SweepMode::transient;
  uint64_t seed = 0;
  PolicyBug bug = PolicyBug::none;
  std::vector<SweepRun> runs;
  std::vector<std::string> failures;  // the failing runs, one line each (at most a few)
  std::string replay;

  bool passed() const { return failures.empty(); }
  // Outcome counts in order of first appearance.
  std::vector<std::pair<Outcome, uint32_t>> outcome_counts() const;
};

// Fault hits per (kind, site), summed over runs, in the order the runtime lists them.
class Coverage {
 public:
  void add(const std::vector<calrt::FaultHit>& hits);
  const std::vector<calrt::FaultHit>& rows() const { return rows_; }
  void print(std::FILE* out) const;
  nlohmann::json to_json() const;

 private:
  std::vector<calrt::FaultHit> rows_;
};

// "PASS name  outcome ...  device X.XXX ms  state 0x..." or "FAIL name: ..." plus the
// replay line.
std::string result_lines(const RunResult& result);
std::string sweep_lines(const SweepResult& result);

nlohmann::json to_json(const RunResult& result);
nlohmann::json to_json(const SweepResult& result);

}  // namespace runner
