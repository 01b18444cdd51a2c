#include "simdev/gen/preset_table.hpp"

#include <array>

#include "simdev/gen/tiny_preset.hpp"

namespace simdev::gen {
namespace {

constexpr std::array kPresets = {
    PresetEntry{"tiny",
                "Qwen3-style dense, 2 layers, hidden 128, 4/2 heads of 32, ffn 256, vocab 1000, "
                "context 4608, 2 chips tensor parallel; seeded weights and FP32 golden set",
                true, &build_tiny},
};

}  // namespace

std::span<const PresetEntry> preset_table() { return kPresets; }

const PresetEntry* find_preset(std::string_view name) {
  for (const PresetEntry& entry : kPresets) {
    if (entry.name == name) {
      return &entry;
    }
  }
  return nullptr;
}

}  // namespace simdev::gen
