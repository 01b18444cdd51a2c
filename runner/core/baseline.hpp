// A frozen baseline (`calrt smoke --baseline REPORT.json`): the JSON report of a known-good
// run on the same golden set. Each FP32 metric of the run is then gated as "not worse than
// the baseline's by more than the calibrated margin" (runner/README.md, "Baselines"). This is
// what a calbin without a contract reference has in place of one: at depth, the distance of a
// correct W8A8 device from an FP32 golden depends on the model, so only a known-good run of
// the same model on the same golden says where a correct device lands.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "calbin/golden.hpp"
#include "runner/core/golden_compare.hpp"

namespace runner {

struct Baseline {
  std::filesystem::path path;
  std::string golden_fingerprint;  // of the golden cases it ran
  Fp32Distance prefill;
  Fp32Distance decode;
  Fp32Distance run;  // gain and greedy agreement over both phases
};

// SHA-256 over the selected cases' names, prompts, greedy tokens and FP32 prefill logits: two
// runs with the same fingerprint compared the device with the same golden rows.
std::string golden_fingerprint(const calbin::GoldenSet& golden, const std::vector<size_t>& cases);

// Reads a smoke report; the error names the file and the field that is missing or wrong.
tl::expected<Baseline, std::string> read_baseline(const std::filesystem::path& path);

// The thresholds a run must meet to be no worse than `b`: the openings of the contract-scaled
// gates (golden_compare.cpp), applied to the baseline's own figures with no floor and no
// ceiling, since a baseline is the same device's known-good distance, not a bound on numerics.
Thresholds against_baseline(const Thresholds& t, const Fp32Distance& b);

}  // namespace runner
