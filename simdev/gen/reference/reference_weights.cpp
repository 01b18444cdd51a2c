#include "simdev/gen/reference/reference_weights.hpp"

#include <string>

#include "calbin/bf16.hpp"

namespace simdev::gen {
namespace {

std::vector<float> to_f32(const StoredWeight& weight) {
  if (weight.spec.storage != Storage::kBf16) {
    return dequantize(weight.quantised);
  }
  std::vector<float> values;
  values.reserve(weight.bf16.size());
  for (const uint16_t bits : weight.bf16) {
    values.push_back(calbin::bf16_to_f32(bits));
  }
  return values;
}

class Lookup {
 public:
  explicit Lookup(const std::vector<StoredWeight>& weights) : weights_(weights) {}

  calbin::Result<std::vector<float>> vector(const std::string& name) const {
    const StoredWeight* weight = find_weight(weights_, name);
    if (weight == nullptr) {
      return calbin::fail("weights", name, "tensor missing");
    }
    return to_f32(*weight);
  }

  calbin::Result<ref::Matrix> matrix(const std::string& name) const {
    const StoredWeight* weight = find_weight(weights_, name);
    if (weight == nullptr || weight->spec.shape.size() != 2) {
      return calbin::fail("weights", name, "2-D tensor missing");
    }
    return ref::Matrix{static_cast<size_t>(weight->spec.shape[0]),
                       static_cast<size_t>(weight->spec.shape[1]), to_f32(*weight)};
  }

 private:
  const std::vector<StoredWeight>& weights_;
};

}  // namespace

calbin::Result<ref::Weights> dequantised_unsplit(const ModelConfig& config,
                                                 const std::vector<StoredWeight>& weights) {
  return ref::gather_weights(config, Lookup(weights));
}

}  // namespace simdev::gen
