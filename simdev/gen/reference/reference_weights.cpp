#include "simdev/gen/reference/reference_weights.hpp"

#include <string>

#include "calbin/bf16.hpp"

namespace simdev::gen {
namespace {

std::vector<float> to_f32(const StoredWeight& weight) {
  if (weight.spec.storage == Storage::kInt8Rows) {
    return dequantize_rows(weight.int8);
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

#define ASSIGN_OR_RETURN(target, expression)  \
  do {                                        \
    auto result_ = (expression);              \
    if (!result_) {                           \
      return tl::unexpected(result_.error()); \
    }                                         \
    target = std::move(*result_);             \
  } while (false)

calbin::Result<ref::LayerWeights> layer(const Lookup& find, uint32_t l) {
  const std::string p = "layers." + std::to_string(l) + ".";
  ref::LayerWeights w;
  ASSIGN_OR_RETURN(w.attn_norm, find.vector(p + "attn_norm"));
  ASSIGN_OR_RETURN(w.q_norm, find.vector(p + "attn.q_norm"));
  ASSIGN_OR_RETURN(w.k_norm, find.vector(p + "attn.k_norm"));
  ASSIGN_OR_RETURN(w.ffn_norm, find.vector(p + "ffn_norm"));
  ASSIGN_OR_RETURN(w.q_proj, find.matrix(p + "attn.q_proj"));
  ASSIGN_OR_RETURN(w.k_proj, find.matrix(p + "attn.k_proj"));
  ASSIGN_OR_RETURN(w.v_proj, find.matrix(p + "attn.v_proj"));
  ASSIGN_OR_RETURN(w.o_proj, find.matrix(p + "attn.o_proj"));
  ASSIGN_OR_RETURN(w.gate_proj, find.matrix(p + "mlp.gate_proj"));
  ASSIGN_OR_RETURN(w.up_proj, find.matrix(p + "mlp.up_proj"));
  ASSIGN_OR_RETURN(w.down_proj, find.matrix(p + "mlp.down_proj"));
  return w;
}

}  // namespace

calbin::Result<ref::Weights> dequantised_unsplit(const ModelConfig& config,
                                                 const std::vector<StoredWeight>& weights) {
  const Lookup find(weights);
  ref::Weights w;
  ASSIGN_OR_RETURN(w.embedding, find.matrix("tok_embeddings"));
  for (uint32_t l = 0; l < config.layers; ++l) {
    ref::LayerWeights one;
    ASSIGN_OR_RETURN(one, layer(find, l));
    w.layers.push_back(std::move(one));
  }
  ASSIGN_OR_RETURN(w.final_norm, find.vector("final_norm"));
  ASSIGN_OR_RETURN(w.lm_head, find.matrix("lm_head"));
  return w;
}

#undef ASSIGN_OR_RETURN

}  // namespace simdev::gen
