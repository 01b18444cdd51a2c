// The manifest-building code functional and timing-only calbins share: identity, LLM facts,
// provenance, the memory plan and the models, from a model config plus whatever the weights
// contribute; and the files list.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/gen/generate.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen {

// What the weights contribute to a manifest.
struct WeightsPart {
  std::vector<calbin::ParamBlock> param_blocks;  // empty for timing-only calbins
  std::vector<calbin::WeightTensor> weights;
  uint64_t param_bytes = 0;  // the most any chip loads; sizes the params reservation
};

// A last key of provenance.config saying how the weights came to be, e.g. "init".
struct ProvenanceNote {
  std::string key;
  std::string text;
};

// Everything but files and golden. Both chips get the same memory plan.
calbin::Result<calbin::Manifest> describe_calbin(const ModelConfig& config,
                                                 const GenOptions& options, WeightsPart weights,
                                                 const ProvenanceNote& note);

// Appends a files entry (size and SHA-256) for each path relative to `dir`.
calbin::Result<void> list_files(const std::filesystem::path& dir,
                                const std::vector<std::string>& paths, calbin::Manifest& m);

// The command line that reproduces `options` (what provenance records when none was given).
std::string equivalent_command(const GenOptions& options);

}  // namespace simdev::gen
