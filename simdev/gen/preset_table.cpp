#include "simdev/gen/preset_table.hpp"

#include <array>

#include "simdev/gen/timing/qwen3_30b_a3b_preset.hpp"
#include "simdev/gen/tiny_preset.hpp"

namespace simdev::gen {
namespace {

constexpr std::array kPresets = {
    PresetEntry{"tiny",
                "Qwen3-style dense, 2 layers, hidden 128, 4/2 heads of 32, ffn 256, vocab 1000, "
                "context 4608, 2 chips tensor parallel; seeded weights and FP32 golden set",
                true, &build_tiny, &tiny_config},
    PresetEntry{"tiny-gqa",
                "tiny's size with 8/4 heads of 16 (two KV heads per chip), prefill chunk 128, "
                "logits tile 32; seeded weights and golden set",
                true, &build_tiny_gqa, &tiny_gqa_config},
    PresetEntry{"qwen3-30b-a3b",
                "the reference model: Qwen3-30B-A3B MoE, 48 layers, hidden 2048, 32/4 heads of "
                "128, 128 experts (8 active) of 768, vocab 151936, context 40960, 2 chips tensor "
                "parallel, W8A8/W4AF16 weights, BF16 KV; timing-only (no weight files)",
                false, &build_qwen3_30b_a3b, &qwen3_30b_a3b_config},
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
