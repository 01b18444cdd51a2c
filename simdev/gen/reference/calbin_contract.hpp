// The device-contract rows of golden cases that came without them: a user's FP32 golden
// from their own NumPy or Hugging Face reference carries the FP32 logits only. When the
// calbin is in this project's format (calbin/MODEL.md, with its weight files), the contract
// reference is computable from the calbin alone, and `calrt smoke` does so: the device is
// then held to the contract bit for bit, and the FP32 gates open to the contract's own
// distance from that golden, as they do for a golden written by `simdev gen`.
#pragma once

#include <filesystem>
#include <span>

#include "calbin/golden.hpp"
#include "calbin/manifest.hpp"
#include "calbin/result.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen {

// The model's shape and packaging as the manifest declares them (llm, chips, the prefill
// chunk). The error names the manifest field that MODEL.md's model cannot have.
calbin::Result<ModelConfig> config_of(const calbin::Manifest& manifest);

// Whether the manifest carries every weight MODEL.md's model needs (a vendor calbin holds
// compiled param blocks with other names): says why not, or is empty.
std::string contract_unavailable(const calbin::Manifest& manifest);

// The calbin's own references for golden cases that came without contract rows. To each
// case go its contract rows (the last token of every prefill chunk and every teacher-forced
// decode step, as simdev gen writes them) and probes; to `fp32[i]` goes the calbin's own FP32
// model on case i's prompt and decode tokens (MODEL.md's FP32 reference over the dequantised
// weights): its prefill and decode rows, top lists and argmaxes (greedy[s] is the argmax of
// row s, while decode step s is fed the case's own greedy[s]), and the same contract rows.
// The smoke measures the contract's distance from that FP32 model, the quantisation's own
// cost, so that a golden which disagrees with the calbin's weights shows as far beyond it.
// Cases are spread over up to `threads` threads; the result does not depend on it.
calbin::Result<void> add_calbin_references(const std::filesystem::path& calbin_dir,
                                           const calbin::Manifest& manifest,
                                           std::span<calbin::GoldenCase*> cases,
                                           std::span<calbin::GoldenCase> fp32, unsigned threads);

}  // namespace simdev::gen
