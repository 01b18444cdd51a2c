// The presets `simdev gen` knows, as an explicit table: adding a preset is adding a row.
#pragma once

#include <filesystem>
#include <span>
#include <string_view>

#include "calbin/manifest.hpp"
#include "simdev/gen/generate.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen {

// Writes the calbin's files and manifest into `dir`, which exists and is empty.
using PresetBuild = calbin::Result<calbin::Manifest> (*)(const GenOptions& options,
                                                         const std::filesystem::path& dir);

struct PresetEntry {
  std::string_view name;
  std::string_view description;
  bool functional = false;
  PresetBuild build = nullptr;
  // The model it builds, for checking options against it before anything is written.
  ModelConfig (*config)() = nullptr;
};

std::span<const PresetEntry> preset_table();
// nullptr when no preset has exactly this name.
const PresetEntry* find_preset(std::string_view name);

}  // namespace simdev::gen
