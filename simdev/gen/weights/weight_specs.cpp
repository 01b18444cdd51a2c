#include <array>
#include <cmath>
#include <string>

#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {
namespace {

// Matrices get N(0, 1/fan_in) so activations keep unit scale through each projection.
WeightSpec matrix(std::string name, std::string role, int layer, int64_t out, int64_t in,
                  int split_axis) {
  return WeightSpec{
      std::move(name),    std::move(role), layer, {out, in},
      Storage::kInt8Rows, split_axis,      0.0,   1.0 / std::sqrt(static_cast<double>(in))};
}

// An expert matrix as the config's quant table stores it: int8 rows or int4 groups.
WeightSpec expert_matrix(const ModelConfig& c, std::string name, std::string role, int layer,
                         int64_t out, int64_t in, int split_axis) {
  WeightSpec spec = matrix(std::move(name), std::move(role), layer, out, in, split_axis);
  if (c.quant.experts == calbin::Dtype::kInt4) {
    spec.storage = Storage::kInt4Groups;
    spec.group = c.quant.group_size;
  }
  return spec;
}

// Norm weights near 1 with some spread, so a wrong norm weight changes the logits.
WeightSpec norm(std::string name, std::string role, int layer, int64_t size) {
  return WeightSpec{std::move(name), std::move(role), layer, {size}, Storage::kBf16, -1, 1.0, 0.1};
}

void add_mlp_specs(const ModelConfig& c, int l, std::vector<WeightSpec>& specs) {
  const std::string p = "layers." + std::to_string(l) + ".";
  const int64_t h = c.hidden, f = c.ffn;
  specs.push_back(norm(p + "ffn_norm", "ffn_norm", l, h));
  specs.push_back(matrix(p + "mlp.gate_proj", "mlp_gate", l, f, h, 0));
  specs.push_back(matrix(p + "mlp.up_proj", "mlp_up", l, f, h, 0));
  specs.push_back(matrix(p + "mlp.down_proj", "mlp_down", l, h, f, 1));
}

// A functional MoE layer (calbin/MODEL.md, "Mixture of experts"), named as Hugging Face's
// Qwen3-MoE names them: a bf16 router `mlp.gate` replicated on every chip, so every chip
// picks the same experts, and each expert an MLP split like the dense one, int8 w8a8_dynamic
// or int4 w4af16 as the quant table says.
void add_moe_specs(const ModelConfig& c, int l, std::vector<WeightSpec>& specs) {
  const std::string p = "layers." + std::to_string(l) + ".";
  const int64_t h = c.hidden, f = c.ffn;
  specs.push_back(norm(p + "ffn_norm", "ffn_norm", l, h));
  // Router logits of std ~2 on a unit-RMS input: top-k picks with clear margins, as a trained
  // router's are.
  const double router_std = 2.0 / std::sqrt(static_cast<double>(h));
  specs.push_back(
      {p + "mlp.gate", "moe_router", l, {c.experts, h}, Storage::kBf16, -1, 0.0, router_std});
  for (uint32_t e = 0; e < c.experts; ++e) {
    const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
    specs.push_back(expert_matrix(c, x + "gate_proj", "moe_expert_gate", l, f, h, 0));
    specs.push_back(expert_matrix(c, x + "up_proj", "moe_expert_up", l, f, h, 0));
    specs.push_back(expert_matrix(c, x + "down_proj", "moe_expert_down", l, h, f, 1));
  }
}

// The experts of one MoE layer stacked into one tensor each, [experts, out, in], as the
// grouped GEMM reads them. Tensor parallel splits each expert's intermediate dimension, so
// every chip holds a slice of every expert (not whole experts: that would be expert
// parallel).
void add_expert_specs(const ModelConfig& c, int l, std::vector<WeightSpec>& specs) {
  const std::string p = "layers." + std::to_string(l) + ".mlp.";
  const int64_t e = c.experts, h = c.hidden, f = c.ffn;
  const auto stacked = [&](const char* name, const char* role, int64_t out, int64_t in, int axis) {
    specs.push_back({p + name,
                     role,
                     l,
                     {e, out, in},
                     Storage::kInt4Groups,
                     axis,
                     0.0,
                     0.0,
                     c.quant.group_size});
  };
  stacked("experts.gate_proj", "moe_gate_exps", f, h, 1);
  stacked("experts.up_proj", "moe_up_exps", f, h, 1);
  stacked("experts.down_proj", "moe_down_exps", h, f, 2);
}

struct StorageFormat {
  calbin::Dtype dtype;
  const char* scheme;
};

// Indexed by Storage.
constexpr std::array kStorageFormats = {
    StorageFormat{calbin::Dtype::kBf16, "none"},
    StorageFormat{calbin::Dtype::kInt8, "w8a8_dynamic"},
    StorageFormat{calbin::Dtype::kInt4, "w4af16"},
};
static_assert(kStorageFormats.size() == static_cast<size_t>(Storage::kInt4Groups) + 1);

const StorageFormat& storage_format(Storage storage) {
  return kStorageFormats.at(static_cast<size_t>(storage));
}

}  // namespace

calbin::Dtype stored_dtype(Storage storage) { return storage_format(storage).dtype; }

const char* quant_scheme(Storage storage) { return storage_format(storage).scheme; }

void add_attention_specs(const ModelConfig& c, int l, std::vector<WeightSpec>& specs) {
  const std::string p = "layers." + std::to_string(l) + ".";
  const int64_t h = c.hidden;
  const int64_t q = int64_t{c.q_heads} * c.head_dim, kv = int64_t{c.kv_heads} * c.head_dim;
  specs.push_back(norm(p + "attn_norm", "attn_norm", l, h));
  specs.push_back(matrix(p + "attn.q_proj", "attn_q", l, q, h, 0));
  specs.push_back(matrix(p + "attn.k_proj", "attn_k", l, kv, h, 0));
  specs.push_back(matrix(p + "attn.v_proj", "attn_v", l, kv, h, 0));
  specs.push_back(norm(p + "attn.q_norm", "attn_q_norm", l, c.head_dim));
  specs.push_back(norm(p + "attn.k_norm", "attn_k_norm", l, c.head_dim));
  specs.push_back(matrix(p + "attn.o_proj", "attn_o", l, h, q, 1));
}

std::vector<WeightSpec> weight_specs(const ModelConfig& c) {
  std::vector<WeightSpec> specs;
  const int64_t v = c.vocab, h = c.hidden;
  specs.push_back({"tok_embeddings", "embedding", -1, {v, h}, Storage::kBf16, -1, 0.0, 1.0});
  for (uint32_t l = 0; l < c.layers; ++l) {
    add_attention_specs(c, static_cast<int>(l), specs);
    if (c.experts > 0) {
      add_moe_specs(c, static_cast<int>(l), specs);
    } else {
      add_mlp_specs(c, static_cast<int>(l), specs);
    }
  }
  specs.push_back(norm("final_norm", "final_norm", -1, h));
  // The final hidden state has unit RMS, so std 3/sqrt(H) gives logits of std ~3: greedy
  // choices with clear margins that the device's int8/bf16 differences do not flip.
  const double lm_std = 3.0 / std::sqrt(static_cast<double>(h));
  specs.push_back({"lm_head", "lm_head", -1, {v, h}, Storage::kBf16, 0, 0.0, lm_std});
  return specs;
}

// The router is replicated: both chips must pick the same experts for every token.
std::vector<WeightSpec> moe_weight_specs(const ModelConfig& c) {
  std::vector<WeightSpec> specs;
  const int64_t v = c.vocab, h = c.hidden;
  specs.push_back({"tok_embeddings", "embedding", -1, {v, h}, Storage::kBf16, -1, 0.0, 0.0});
  for (uint32_t l = 0; l < c.layers; ++l) {
    const int layer = static_cast<int>(l);
    add_attention_specs(c, layer, specs);
    specs.push_back(norm("layers." + std::to_string(l) + ".ffn_norm", "ffn_norm", layer, h));
    specs.push_back(matrix("layers." + std::to_string(l) + ".mlp.router", "moe_router", layer,
                           c.experts, h, -1));
    add_expert_specs(c, layer, specs);
  }
  specs.push_back(norm("final_norm", "final_norm", -1, h));
  specs.push_back(matrix("lm_head", "lm_head", -1, v, h, 0));
  return specs;
}

}  // namespace simdev::gen
