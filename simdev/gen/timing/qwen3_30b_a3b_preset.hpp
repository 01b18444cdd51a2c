// "qwen3-30b-a3b": the reference model of REFERENCE.md as a timing-only calbin. Op
// lists, memory plan and declared weight sizes, no weight files and no golden set: the
// simulator can load, size and time it, not compute with it.
#pragma once

#include <filesystem>

#include "calbin/manifest.hpp"
#include "simdev/gen/generate.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen {

ModelConfig qwen3_30b_a3b_config();
calbin::Result<calbin::Manifest> build_qwen3_30b_a3b(const GenOptions& options,
                                                     const std::filesystem::path& dir);

}  // namespace simdev::gen
