// Options of `calrt scenario` (scenarios/README.md): scenario files, campaigns of random
// fault plans, and exhaustive sweeps.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/report/shard.hpp"

namespace runner {

struct ScenarioOptions {
  std::vector<std::string> files;
  std::optional<uint64_t> seed;      // overrides each file's seed; a campaign's first seed
  std::optional<uint32_t> campaign;  // N random plans over the built-in workload
  bool sweep = false;                // sweep every file, sweep section or not
  std::string policy_bug = "none";   // TEST ONLY (scenarios/README.md, negative controls)
  std::string calbin_dir = ".calrt/calbins";
  std::string device = "sim";
  std::string json;
  std::string junit;  // JUnit XML: one testcase per scenario, campaign plan or sweep
  std::string md;     // a markdown table per kind of run
  std::string jsonl;  // one JSON line per scenario, plan or sweep as it finishes; "-": stdout
  std::optional<Shard> shard;  // --shard I/N: a campaign's plans or the files, k mod N = I
  bool coverage = false;
  bool progress = true;  // a progress line over a campaign's plans on a terminal (--quiet: none)
};

// Runs the command; returns the process exit code (exit_codes.hpp). Never throws.
int run_scenario(const ScenarioOptions& options);

}  // namespace runner
