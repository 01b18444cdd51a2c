// The runtime ABI conformance suite: one check per clause of abi/CONFORMANCE.md, registered
// with its id, group and title, run against any calrt::Api (the simulator in process, a
// runtime library, a negative-control table a test builds).
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "abi/calrt.hpp"
#include "runner/core/device/device_select.hpp"

namespace runner {

struct ClauseResult {
  std::string id, title;
  enum class Verdict { pass, fail, skip } verdict = Verdict::pass;
  std::string reason;  // empty for a pass
  double seconds = 0.0;
};
const char* to_string(ClauseResult::Verdict verdict);  // "PASS", "FAIL", "SKIP"

struct ConformanceOptions {
  std::filesystem::path calbin;  // a functional calbin directory (simdev gen --preset tiny)
  std::string device_config;     // passed to every Device_Create (overrides spec.config)
  std::vector<std::string> only; /* clause id prefixes */
  // Each clause runs in a child process killed after this much wall time (a hung call).
  std::chrono::milliseconds clause_timeout{60000};
  // The whole suite's wall-time budget (0: none). Clauses left when it is spent fail as
  // "not run" and the reports are still written, inside a CI job's own timeout.
  std::chrono::milliseconds suite_timeout{0};
};

class ClauseContext;

struct Clause {
  std::string id;     // "JOB.4"
  std::string group;  // "JOB"
  std::string title;
  // Returns for a pass; throws ClauseFailure / ClauseSkip (conformance_context.hpp) or
  // anything else (a failure).
  std::function<void(ClauseContext&)> check;
};

// Every clause, in CONFORMANCE.md's order.
const std::vector<Clause>& conformance_clauses();

// Whether `prefix` selects at least one clause (an id or an id prefix such as "KV" or
// "KV.1"); `--only` rejects a prefix that selects nothing.
bool conformance_prefix_known(const std::string& prefix);

// How many clauses `options.only` selects (all when empty): a progress line's total.
size_t conformance_selected_count(const ConformanceOptions& options);

// The verdicts for a runtime whose library is there but that the loader refused (a table of
// another major, a malformed table, no entry point): a conformance failure, not bad input.
// VER.1 (a table of the current major) fails with the loader's words, whether selected or
// not, and every other selected clause is skipped for that reason.
std::vector<ClauseResult> refused_runtime_results(const ConformanceOptions& options,
                                                  const std::string& why);

// Runs the clauses `options.only` selects (all when empty) in order. Never throws for a
// misbehaving runtime: that fails the clause. Throws std::invalid_argument for bad options
// (an unreadable calbin, an unknown prefix), which the command reports as bad input.
std::vector<ClauseResult> run_conformance(const calrt::Api& api, const DeviceSpec& spec,
                                          const ConformanceOptions& options);
// The same, calling `on_result` as each clause ends (the command prints its line then, so
// that a runtime that kills the process leaves the lines of the clauses before).
std::vector<ClauseResult> run_conformance(
    const calrt::Api& api, const DeviceSpec& spec, const ConformanceOptions& options,
    const std::function<void(const ClauseResult&)>& on_result);

}  // namespace runner
