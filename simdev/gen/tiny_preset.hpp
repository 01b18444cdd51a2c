// "tiny": the default functional model, a two-layer Qwen3-style dense model small enough for
// the FP32 reference and the simulator to run every golden case in seconds.
#pragma once

#include <filesystem>

#include "calbin/manifest.hpp"
#include "simdev/gen/generate.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen {

ModelConfig tiny_config();
calbin::Result<calbin::Manifest> build_tiny(const GenOptions& options,
                                            const std::filesystem::path& dir);

}  // namespace simdev::gen
