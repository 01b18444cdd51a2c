// Builds a functional calbin (seeded weights, memory plan, models, golden set) for a model
// config into an existing, empty directory.
#pragma once

#include <filesystem>

#include "calbin/manifest.hpp"
#include "simdev/gen/generate.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen {

calbin::Result<calbin::Manifest> build_functional(const ModelConfig& config,
                                                  const GenOptions& options,
                                                  const std::filesystem::path& dir);

// The command line that reproduces `options` (what provenance records when none was given).
std::string equivalent_command(const GenOptions& options);

}  // namespace simdev::gen
