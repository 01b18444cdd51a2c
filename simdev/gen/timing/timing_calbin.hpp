// Builds a timing-only calbin (manifest.timing_only = true) for a model config into an
// existing, empty directory: the same manifest as a functional calbin (calbin_description)
// but with weights declared, not stored, no param blocks and no golden set. The only file
// is a README saying so, so that a directory listing does not look like a broken calbin.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/gen/generate.hpp"
#include "simdev/gen/model_config.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {

inline constexpr const char* kTimingReadme = "README.txt";

// `weights_note` says how the weights are quantised; it is recorded in provenance.config.
calbin::Result<calbin::Manifest> build_timing_only(const ModelConfig& config,
                                                   const std::vector<WeightSpec>& specs,
                                                   const std::string& weights_note,
                                                   const GenOptions& options,
                                                   const std::filesystem::path& dir);

}  // namespace simdev::gen
