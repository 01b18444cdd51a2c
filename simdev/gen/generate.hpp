// `simdev gen`: writes calbins. Functional presets carry seeded weights and a golden set
// computed by the independent FP32 reference (reference_model.hpp); timing-only presets
// carry op lists and declared sizes but no weight files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "calbin/manifest.hpp"

namespace simdev::gen {

struct GenOptions {
  std::string preset = "tiny";
  // When set, the model comes from this file instead of the preset (config_file.hpp).
  std::filesystem::path config_file;
  // With config_file: the weights from this directory's safetensors instead of seeded ones.
  std::filesystem::path weights_dir;
  std::filesystem::path out_dir;
  uint64_t seed = 1;
  bool with_golden = true;  // functional presets only
  bool long_cases = true;   // include prompts of 4095, 4096, 4097 and near the context limit
  bool force = false;       // replace out_dir if it exists
  // Recorded as provenance.command; when empty, a command equivalent to these options.
  std::string command_line;
  unsigned threads = 0;  // golden computation threads; 0: the hardware's concurrency
  // When non-zero, replaces the model's decode_top_k (model_config.hpp): the same model
  // with a decode that ranks on the device.
  uint32_t decode_top_k = 0;
};

struct PresetInfo {
  std::string name;
  std::string description;
  bool functional = false;
};

std::vector<PresetInfo> presets();

// The options' own errors (unknown preset, no usable --out, an existing directory without
// --force): what generate would refuse before writing anything. A command line maps these to
// its usage exit code.
calbin::Result<void> check_gen_options(const GenOptions& options);

// Writes a complete calbin directory. The directory appears only when complete: it is
// built under a temporary name next to out_dir and renamed into place.
calbin::Result<calbin::Manifest> generate(const GenOptions& options);
// That temporary name: OUT_DIR.tmp-PID, so a command can remove it when it is interrupted.
std::filesystem::path staging_dir(const GenOptions& options);

}  // namespace simdev::gen
