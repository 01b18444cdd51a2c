#include "simdev/gen/weights/weights.hpp"

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
  } else {
    const auto rows = static_cast<size_t>(spec.shape.at(0));
    const auto cols = static_cast<size_t>(spec.shape.at(1));
    weight.int8 = quantize_rows(values, rows, cols);
  }
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
