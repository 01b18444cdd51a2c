// Packs the stored weights into param block files (calbin/MODEL.md): block 0 holds the
// replicated tensors and is loaded by every chip; block 1 + c holds chip c's shards. Every
// tensor and scale vector starts at a 64-byte aligned offset; a tensor's scales follow it in
// the same file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/gen/model_config.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {

inline constexpr uint64_t kParamAlignment = 64;
inline uint64_t param_aligned(uint64_t bytes) {
  return (bytes + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
}

struct BlockImage {
  std::string name;  // "param_blk0"
  std::string file;  // "param_blk0.bin"
  uint32_t chip_mask = 0;
  std::vector<uint8_t> bytes;
};

struct ParamLayout {
  std::vector<BlockImage> blocks;
  std::vector<calbin::WeightTensor> entries;  // one per stored shard, manifest-ready
};

ParamLayout layout_param_blocks(const ModelConfig& config,
                                const std::vector<StoredWeight>& weights);
// Writes every block image as <dir>/<file>.
calbin::Result<void> write_param_blocks(const std::filesystem::path& dir,
                                        const ParamLayout& layout);
// Bytes chip `chip` loads: the sum of the blocks whose mask includes it.
uint64_t param_bytes_for_chip(const ParamLayout& layout, uint32_t chip);

}  // namespace simdev::gen
