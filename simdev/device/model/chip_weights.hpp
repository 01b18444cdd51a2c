// One chip's weights as the device holds them after configure, in the layout the kernels
// read: its shard of every split matrix and a copy of every replicated vector. The large
// BF16 tables (embedding, lm_head) stay BF16 and are widened as they are read; the small BF16
// vectors are widened to FP32 once at load; int8 matrices keep their int8 values and scales.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/device/base/status.hpp"
#include "simdev/device/model/kernels.hpp"
#include "simdev/device/model/model_dims.hpp"

namespace simdev {

// A quantised weight shard: w8a8_dynamic (int8, one scale per row) or w4af16 (int4 values
// unpacked to one byte each, one scale per `group` inputs of a row; calbin/MODEL.md).
struct Int8Matrix {
  size_t rows = 0;
  size_t cols = 0;
  std::vector<int8_t> values;  // [rows][cols]
  std::vector<float> scales;   // [rows][cols / group]
  bool int4 = false;
  size_t group = 0;               // inputs per scale: cols for w8a8_dynamic
  std::vector<int32_t> row_sums;  // w8a8_dynamic: kernels::Int8Weights::row_sums

  kernels::Int8Weights view() const {
    return {values.data(), scales.data(), row_sums.data(), rows, cols};
  }
};

// One MLP's shard: a dense layer's, or one expert's of a mixture of experts.
struct MlpWeights {
  Int8Matrix gate_proj;  // [F/n, H]
  Int8Matrix up_proj;    // [F/n, H]
  Int8Matrix down_proj;  // [H, F/n]
};

struct LayerWeights {
  std::vector<float> attn_norm;     // [H]
  std::vector<float> q_norm;        // [D]
  std::vector<float> k_norm;        // [D]
  std::vector<float> ffn_norm;      // [H]
  Int8Matrix q_proj;                // [Hq/n * D, H]
  Int8Matrix k_proj;                // [Hkv/n * D, H]
  Int8Matrix v_proj;                // [Hkv/n * D, H]
  Int8Matrix o_proj;                // [H, Hq/n * D]
  MlpWeights mlp;                   // dense models
  std::vector<float> router;        // MoE: [E, H], replicated
  std::vector<MlpWeights> experts;  // MoE: every expert's shard
};

struct ChipWeights {
  uint32_t chip = 0;
  // [V, H] BF16 as stored: a step widens the rows it looks up, so the table takes half the
  // memory of FP32 (311 MB for a 151936-token vocabulary of hidden 1024). Chip 0's only: the
  // copies of the other chips are the same bytes and are not read.
  std::vector<uint16_t> embedding;
  std::vector<float> final_norm;  // [H]
  std::vector<uint16_t> lm_head;  // [V/n, H] BF16
  std::vector<LayerWeights> layers;
  uint64_t loaded_bytes = 0;  // bytes read from the param files, scales included
};

// Loads chip `chip`'s weights from the calbin directory. Every failure is CALBIN_INVALID
// naming the weight, the file and the value (a shard outside its file, a wrong shape or
// split, a missing shard for this chip). `swap_nibbles` reads int4 bytes high nibble first
// (the int4_nibbles_swapped mutant).
Expected<ChipWeights> load_chip_weights(const std::filesystem::path& calbin_dir,
                                        const calbin::Manifest& manifest, const ModelDims& dims,
                                        uint32_t chip, bool swap_nibbles = false);

}  // namespace simdev
