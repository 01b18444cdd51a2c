// The reference's view of the weights: dequantised (int8 * row scale, bf16 -> f32) and
// unsplit. The golden sets are computed from the calbin's files (calbin_weights.hpp); the
// generator's in-memory tensors give the same values and serve tests that write no files.
#pragma once

#include <string>
#include <vector>

#include "calbin/result.hpp"
#include "simdev/gen/model_config.hpp"
#include "simdev/gen/reference/reference_model.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {

calbin::Result<ref::Weights> dequantised_unsplit(const ModelConfig& config,
                                                 const std::vector<StoredWeight>& weights);

namespace ref {

// Gathers MODEL.md's tensors by name: `find.vector(name)` gives a Result<std::vector<float>>
// and `find.matrix(name)` a Result<Matrix>; the first missing tensor is the error.
template <class Find>
calbin::Result<Weights> gather_weights(const ModelConfig& config, const Find& find) {
  Weights w;
  calbin::Result<void> ok;
  auto take = [&ok](auto& target, auto result) {
    if (!ok) return;
    if (!result) {
      ok = tl::unexpected(result.error());
      return;
    }
    target = std::move(*result);
  };
  take(w.embedding, find.matrix("tok_embeddings"));
  w.layers.resize(config.layers);
  for (uint32_t l = 0; l < config.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    LayerWeights& one = w.layers[l];
    take(one.attn_norm, find.vector(p + "attn_norm"));
    take(one.q_norm, find.vector(p + "attn.q_norm"));
    take(one.k_norm, find.vector(p + "attn.k_norm"));
    take(one.ffn_norm, find.vector(p + "ffn_norm"));
    take(one.q_proj, find.matrix(p + "attn.q_proj"));
    take(one.k_proj, find.matrix(p + "attn.k_proj"));
    take(one.v_proj, find.matrix(p + "attn.v_proj"));
    take(one.o_proj, find.matrix(p + "attn.o_proj"));
    auto take_mlp = [&](const std::string& at, Mlp& mlp) {
      take(mlp.gate_proj, find.matrix(at + "gate_proj"));
      take(mlp.up_proj, find.matrix(at + "up_proj"));
      take(mlp.down_proj, find.matrix(at + "down_proj"));
    };
    if (config.experts == 0) {
      take_mlp(p + "mlp.", one.mlp);
    } else {
      take(one.router, find.matrix(p + "mlp.gate"));
      one.experts.resize(config.experts);
      for (uint32_t e = 0; e < config.experts; ++e) {
        take_mlp(p + "mlp.experts." + std::to_string(e) + ".", one.experts[e]);
      }
    }
  }
  take(w.final_norm, find.vector("final_norm"));
  take(w.lm_head, find.matrix("lm_head"));
  if (!ok) {
    return tl::unexpected(ok.error());
  }
  return w;
}

}  // namespace ref
}  // namespace simdev::gen
