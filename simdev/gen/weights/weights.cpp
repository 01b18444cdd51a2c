#include "simdev/gen/weights/weights.hpp"

#include <set>

#include "calbin/bf16.hpp"
#include "simdev/gen/rng.hpp"

namespace simdev::gen {
namespace {

size_t element_count(const std::vector<int64_t>& shape) {
  size_t count = 1;
  for (const int64_t dim : shape) {
    count *= static_cast<size_t>(dim);
  }
  return count;
}

std::vector<float> draw(const WeightSpec& spec, uint64_t seed) {
  NormalStream stream(derive_seed(seed, "weight:" + spec.name));
  std::vector<float> values(element_count(spec.shape));
  for (float& value : values) {
    value = static_cast<float>(spec.init_mean + spec.init_std * stream.next_normal());
  }
  return values;
}

StoredWeight store(const WeightSpec& spec, const std::vector<float>& values) {
  StoredWeight weight{spec, {}, {}};
  if (spec.storage == Storage::kBf16) {
    weight.bf16.reserve(values.size());
    for (const float value : values) {
      weight.bf16.push_back(calbin::f32_to_bf16(value));
    }
    return weight;
  }
  const auto rows = static_cast<size_t>(spec.shape.at(0));
  const auto cols = static_cast<size_t>(spec.shape.at(1));
  weight.quantised = spec.storage == Storage::kInt8Rows
                         ? quantize_rows(values, rows, cols)
                         : quantize_int4_groups(values, rows, cols, spec.group);
  return weight;
}

}  // namespace

std::vector<StoredWeight> make_weights(const ModelConfig& config, uint64_t seed) {
  std::vector<StoredWeight> weights;
  for (const WeightSpec& spec : weight_specs(config)) {
    weights.push_back(store(spec, draw(spec, seed)));
  }
  return weights;
}

std::string hf_weight_name(const std::string& name, bool tied_embeddings) {
  if (name == "tok_embeddings" || (name == "lm_head" && tied_embeddings)) {
    return "model.embed_tokens.weight";
  }
  if (name == "lm_head") return "lm_head.weight";
  if (name == "final_norm") return "model.norm.weight";
  // layers.L.rest
  const size_t dot = name.find('.', 7);
  const std::string layer = name.substr(0, dot), rest = name.substr(dot + 1);
  std::string hf = "model." + layer + ".";
  if (rest == "attn_norm") {
    hf += "input_layernorm";
  } else if (rest == "ffn_norm") {
    hf += "post_attention_layernorm";
  } else if (rest.rfind("attn.", 0) == 0) {
    hf += "self_attn." + rest.substr(5);
  } else {
    hf += rest;  // mlp.gate_proj, ...
  }
  return hf + ".weight";
}

calbin::Result<void> check_checkpoint(const ModelConfig& config, const SafetensorsDir& checkpoint) {
  std::set<std::string> used;
  for (const WeightSpec& spec : weight_specs(config)) {
    const std::string name = hf_weight_name(spec.name, config.tied_embeddings);
    if (auto ok = checkpoint.check(name, spec.shape); !ok) return ok;
    used.insert(name);
  }
  for (const std::string& name : checkpoint.names()) {
    const bool harmless = name.ends_with("rotary_emb.inv_freq") ||
                          (name == "lm_head.weight" && config.tied_embeddings);
    if (!used.count(name) && !harmless) {
      return calbin::fail("", name, "in the weights but not in the model the config describes");
    }
  }
  return {};
}

calbin::Result<std::vector<StoredWeight>> read_weights(const ModelConfig& config,
                                                       const SafetensorsDir& checkpoint) {
  if (auto ok = check_checkpoint(config, checkpoint); !ok) return tl::unexpected(ok.error());
  std::vector<StoredWeight> weights;
  for (const WeightSpec& spec : weight_specs(config)) {
    auto values = checkpoint.read(hf_weight_name(spec.name, config.tied_embeddings), spec.shape);
    if (!values) return tl::unexpected(values.error());
    weights.push_back(store(spec, *values));
  }
  return weights;
}

calbin::WeightTensor manifest_entry(const WeightSpec& spec) {
  calbin::WeightTensor entry;
  entry.name = spec.name;
  entry.role = spec.role;
  entry.layer = spec.layer;
  entry.shape = spec.shape;
  entry.dtype = stored_dtype(spec.storage);
  return entry;
}

const StoredWeight* find_weight(const std::vector<StoredWeight>& weights, const std::string& name) {
  for (const StoredWeight& weight : weights) {
    if (weight.spec.name == name) {
      return &weight;
    }
  }
  return nullptr;
}

}  // namespace simdev::gen
