// `calrt conformance`: the suite of abi/CONFORMANCE.md on one runtime, one line per clause,
// a summary, and JUnit XML / JSON reports on request.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runner/conformance/conformance.hpp"
#include "runner/core/report/junit.hpp"

namespace runner {

struct ConformanceCommandOptions {
  std::string device = "sim";
  std::string device_kind = "sim";
  uint32_t device_index = 0;
  std::string device_config;
  std::string calbin;                         // --calbin DIR: a functional calbin
  std::string calbin_dir = ".calrt/calbins";  // --calbin-dir DIR: DIR/tiny, generated when missing
  std::vector<std::string> only;              // clause id prefixes
  double clause_timeout_s = 60.0;             // --clause-timeout
  double suite_timeout_s = 0.0;               // --timeout (0: none)
  std::string junit;
  std::string json;
  std::string md;        // --md FILE: the clauses as a markdown table
  std::string jsonl;     // --jsonl FILE|-: one record per clause as it finishes
  bool progress = true;  // a progress line over the clauses on a terminal (--quiet: none)
};

// The results as JUnit suites: one per clause group, in the order the groups first appear.
std::vector<JunitSuite> conformance_junit_suites(const std::vector<ClauseResult>& results);

// Runs the command; returns the process exit code (exit_codes.hpp). Never throws.
int run_conformance_command(const ConformanceCommandOptions& options);

}  // namespace runner
