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

  const calbin::GoldenCase& golden_case(size_t i) const { return golden.cases[case_indices[i]]; }
};

// Reads CALBIN/manifest.json, verifies every listed file, checks that each model tensor
// fits its buffer, reads the golden set and selects the cases. The error names the file,
// the field and the value.
tl::expected<HostInputs, std::string> load_host_inputs(const SmokeOptions& options);

}  // namespace runner
