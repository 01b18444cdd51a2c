#include "simdev/gen/weights/weights.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <set>
#include <thread>

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

// Student's t with 4 degrees of freedom, scaled to unit variance (its own is 2): the heavy
// tails of trained weight matrices, whose largest entries set the int8 row scales. Only
// IEEE-exact operations and sqrt, so every libm draws the same values.
double next_heavy_tailed(NormalStream& stream) {
  const double z = stream.next_normal();
  double chi2 = 0.0;
  for (int i = 0; i < 4; ++i) {
    const double n = stream.next_normal();
    chi2 += n * n;
  }
  return z / std::sqrt(chi2 / 4.0) / std::sqrt(2.0);
}

std::vector<float> draw(const WeightSpec& spec, uint64_t seed, bool heavy_tailed) {
  NormalStream stream(derive_seed(seed, "weight:" + spec.name));
  std::vector<float> values(element_count(spec.shape));
  for (float& value : values) {
    const double unit = heavy_tailed ? next_heavy_tailed(stream) : stream.next_normal();
    value = static_cast<float>(spec.init_mean + spec.init_std * unit);
  }
  return values;
}

// Trained-like weights: the inputs of a trained LLM's linear layers carry a few fixed
// hidden channels 10x to 100x the others (LLM.int8's outlier features, SmoothQuant's
// activation outliers), and the weights that read those channels are small. A per-token
// int8 activation scale is then set by the outlier channels and the other channels keep a
// few int8 levels: the error that dominates W8A8 in real models. Here the attention and FFN
// norm weights carry the channels at `outlier_gain` (10 by default) and the matrices reading
// the normed rows (q, k, v, gate, up, and each expert's gate and up) at its inverse, so the
// FP32 model is as well
// conditioned as before and only the quantisation pays. The channels are drawn from the
// seed.
std::vector<uint32_t> outlier_channels(const ModelConfig& c, uint64_t seed) {
  NormalStream stream(derive_seed(seed, "outlier_channels"));
  const uint32_t count = std::max<uint32_t>(2, c.hidden / 128);
  std::vector<uint32_t> channels;
  while (channels.size() < count) {
    const uint32_t channel = stream.next_below(c.hidden);
    if (std::find(channels.begin(), channels.end(), channel) == channels.end()) {
      channels.push_back(channel);
    }
  }
  return channels;
}

void apply_outliers(const WeightSpec& spec, const std::vector<uint32_t>& channels, float gain,
                    std::vector<float>& values) {
  static const std::set<std::string> kReaders = {
      "attn_q", "attn_k", "attn_v", "mlp_gate", "mlp_up", "moe_expert_gate", "moe_expert_up"};
  if (spec.role == "attn_norm" || spec.role == "ffn_norm") {
    for (const uint32_t ch : channels) values[ch] *= gain;
  } else if (kReaders.count(spec.role) != 0) {
    const auto in = static_cast<size_t>(spec.shape.at(1));
    for (size_t row = 0; row < values.size() / in; ++row) {
      for (const uint32_t ch : channels) values[row * in + ch] /= gain;
    }
  }
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

std::vector<StoredWeight> make_weights(const ModelConfig& config, uint64_t seed, unsigned threads) {
  const bool trained = config.weight_init == ModelConfig::WeightInit::kTrained;
  const std::vector<uint32_t> channels =
      trained ? outlier_channels(config, seed) : std::vector<uint32_t>{};
  const std::vector<WeightSpec> specs = weight_specs(config);
  // Every tensor draws from a stream of its own (derive_seed of its name), so the tensors can
  // be drawn side by side with the same bits. The largest go first, so that the two tables
  // of a large vocabulary do not end up last on one thread.
  std::vector<size_t> order(specs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return element_count(specs[a].shape) > element_count(specs[b].shape);
  });
  std::vector<StoredWeight> weights(specs.size());
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t k = next++; k < order.size(); k = next++) {
      const WeightSpec& spec = specs[order[k]];
      // Quantised matrices are heavy-tailed; BF16 tensors (norms, tables, router) stay Gaussian.
      const bool heavy_tailed = trained && spec.storage != Storage::kBf16;
      std::vector<float> values = draw(spec, seed, heavy_tailed);
      if (trained) apply_outliers(spec, channels, static_cast<float>(config.outlier_gain), values);
      weights[order[k]] = store(spec, values);
    }
  };
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> helpers;
  for (unsigned t = 1; t < threads && t < specs.size(); ++t) helpers.emplace_back(work);
  work();
  for (std::thread& helper : helpers) helper.join();
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
