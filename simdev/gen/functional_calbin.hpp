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

}  // namespace simdev::gen
