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

// "tiny-gqa": the same size with the shape choices tiny leaves untested: two KV heads per
// chip (a GQA group of 2 on each chip, so a wrong head-to-KV-head mapping shows), a head of
// 16, a prefill chunk of 128 and a logits tile of 32.
ModelConfig tiny_gqa_config();
calbin::Result<calbin::Manifest> build_tiny_gqa(const GenOptions& options,
                                                const std::filesystem::path& dir);

}  // namespace simdev::gen
