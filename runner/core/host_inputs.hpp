// The host-side inputs of the smoke, read and validated before any device step: the
// calbin's manifest and files, and the golden set. A problem here is bad input (exit 2);
// its message names the file and the field.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "calbin/golden.hpp"
#include "calbin/manifest.hpp"
#include "runner/core/session_options.hpp"

namespace runner {

struct HostInputs {
  calbin::Manifest manifest;
  std::filesystem::path golden_dir;
  calbin::GoldenSet golden;
  std::vector<size_t> case_indices;  // into golden.cases, in run order
  // Where the selected cases' contract rows come from, or why there are none
  // (core/golden_contract.hpp).
  std::string contract_source;

  // When the contract rows were computed from the calbin (core/golden_contract.hpp): the
  // calbin's own FP32 model on each golden case's tokens, parallel to golden.cases, with the
  // same contract rows. The FP32 gates open to the contract's distance from it, not from the
  // user's golden, so that a golden which disagrees with the calbin's weights cannot open
  // the gates to its own distance.
  std::vector<calbin::GoldenCase> calbin_fp32;

  const calbin::GoldenCase& golden_case(size_t i) const { return golden.cases[case_indices[i]]; }
  // What the contract reference's rows of `one` (a case of golden.cases) are measured
  // against: the calbin's FP32 model when it was computed, else the golden case itself.
  const calbin::GoldenCase& reference_case(const calbin::GoldenCase& one) const {
    if (calbin_fp32.empty()) return one;
    return calbin_fp32.at(static_cast<size_t>(&one - golden.cases.data()));
  }
};

// Reads CALBIN/manifest.json, verifies every listed file, checks that each model tensor
// fits its buffer, reads the golden set and selects the cases. The error names the file,
// the field and the value.
tl::expected<HostInputs, std::string> load_host_inputs(const SmokeOptions& options);

}  // namespace runner
