// The seeded weights of a functional preset, in the form they are stored (calbin/MODEL.md):
// int8 w8a8_dynamic matrices with per-row scales, bf16 embeddings, norms and lm_head. These
// are the logical (unsplit) tensors; param_blocks.hpp shards them into files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/gen/model_config.hpp"
#include "simdev/gen/weights/quantize.hpp"
#include "simdev/gen/weights/safetensors.hpp"

namespace simdev::gen {

// kInt4Groups is int4 w4af16 with one scale per `WeightSpec::group` inputs (a MoE's experts
// when the config's quant table says so).
enum class Storage { kBf16, kInt8Rows, kInt4Groups };

// The manifest dtype and quant scheme a tensor of this storage is written with.
calbin::Dtype stored_dtype(Storage storage);
const char* quant_scheme(Storage storage);

struct WeightSpec {
  std::string name;  // e.g. "layers.0.attn.q_proj"
  std::string role;  // e.g. "attn_q"
  int layer = -1;
  std::vector<int64_t> shape;  // [n], [out, in], or [experts, out, in] for stacked experts
  Storage storage = Storage::kBf16;
  int split_axis = -1;  // -1: replicated on every chip
  double init_mean = 0.0;
  double init_std = 1.0;
  uint32_t group = 0;  // kInt4Groups: inputs per scale
};

struct StoredWeight {
  WeightSpec spec;
  std::vector<uint16_t> bf16;  // kBf16: the whole tensor, row-major
  QuantisedMatrix quantised;   // kInt8Rows, kInt4Groups: the whole matrix and its scales
};

// Every tensor of the model in MODEL.md's table order, with its initialisation.
std::vector<WeightSpec> weight_specs(const ModelConfig& config);
// The attention tensors of layer `l` (attn_norm to o_proj), shared by dense and MoE models.
void add_attention_specs(const ModelConfig& config, int l, std::vector<WeightSpec>& specs);
// Every tensor of a Qwen3-MoE model, for timing-only presets: attention as in the dense
// model, a replicated int8 router, stacked int4 experts, an int8 lm_head. Nothing is drawn,
// so the init fields are unused.
std::vector<WeightSpec> moe_weight_specs(const ModelConfig& config);
// Draws each tensor from its own stream derived from (seed, name), then stores it.
// `threads` draw tensors side by side (0: one per hardware thread), with the same result.
std::vector<StoredWeight> make_weights(const ModelConfig& config, uint64_t seed,
                                       unsigned threads = 0);
// Reads each tensor from a Hugging Face checkpoint (its name: hf_weight_name), checks its
// shape against the config, then stores it as make_weights() does. A tensor of the
// checkpoint the model does not use is an error: the config would not describe it.
calbin::Result<std::vector<StoredWeight>> read_weights(const ModelConfig& config,
                                                       const SafetensorsDir& checkpoint);
// What read_weights() checks before reading: every tensor there with its shape, none unused.
calbin::Result<void> check_checkpoint(const ModelConfig& config, const SafetensorsDir& checkpoint);
// "layers.3.attn.q_proj" -> "model.layers.3.self_attn.q_proj.weight", and so on.
std::string hf_weight_name(const std::string& name, bool tied_embeddings);
// The manifest entry of a tensor before it is placed: name, role, layer, shape and dtype.
calbin::WeightTensor manifest_entry(const WeightSpec& spec);
// nullptr when absent.
const StoredWeight* find_weight(const std::vector<StoredWeight>& weights, const std::string& name);

}  // namespace simdev::gen
