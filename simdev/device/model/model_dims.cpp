#include "simdev/device/model/model_dims.hpp"

#include <string>

#include "simdev/device/model/kernels.hpp"

namespace simdev {
namespace {

Status require(bool ok, const std::string& what) {
  if (!ok) {
    return fail(CALRT_CALBIN_INVALID, "manifest llm: " + what);
  }
  return {};
}

}  // namespace

Expected<ModelDims> model_dims(const calbin::Manifest& manifest) {
  const calbin::LlmInfo& llm = manifest.llm;
  ModelDims dims;
  dims.layers = llm.layers;
  dims.hidden = llm.hidden;
  dims.q_heads = llm.q_heads;
  dims.kv_heads = llm.kv_heads;
  dims.head_dim = llm.head_dim;
  dims.ffn = llm.ffn;
  dims.experts = llm.experts;
  dims.active_experts = llm.active_experts;
  dims.norm_topk_prob = llm.norm_topk_prob;
  dims.vocab = llm.vocab;
  dims.chips = manifest.chips;
  dims.rms_eps = llm.rms_eps;
  dims.rope_theta = llm.rope_theta;
  dims.v_int8 = llm.v_dtype == calbin::Dtype::kInt8;
  const std::string n = std::to_string(dims.chips);
  Status checks[] = {
      require(dims.chips >= 1, "chips = 0"),
      require(
          dims.layers > 0 && dims.hidden > 0 && dims.head_dim > 0 && dims.vocab > 0 && dims.ffn > 0,
          "a dimension (layers, hidden, head_dim, vocab, ffn) is 0"),
      require(dims.kv_heads > 0 && dims.kv_heads % dims.chips == 0,
              "kv_heads = " + std::to_string(dims.kv_heads) + " is not a multiple of chips = " + n),
      require(dims.q_heads > 0 && dims.q_heads % dims.kv_heads == 0,
              "q_heads = " + std::to_string(dims.q_heads) + " is not a multiple of kv_heads"),
      require(dims.ffn % dims.chips == 0,
              "ffn = " + std::to_string(dims.ffn) + " is not a multiple of chips = " + n),
      require(dims.vocab % dims.chips == 0,
              "vocab = " + std::to_string(dims.vocab) + " is not a multiple of chips = " + n),
      // Running a cache of another element type as BF16 would pass off other numerics as
      // the calbin's.
      require(llm.k_dtype == calbin::Dtype::kBf16,
              "k_dtype = " + std::string(calbin::to_string(llm.k_dtype)) +
                  " is not supported (the K-cache is bf16)"),
      require(llm.v_dtype == calbin::Dtype::kBf16 || dims.v_int8,
              "v_dtype = " + std::string(calbin::to_string(llm.v_dtype)) +
                  " is not supported (the V-cache is bf16 or int8)"),
      require(
          (dims.experts == 0) == (dims.active_experts == 0) && dims.active_experts <= dims.experts,
          "active_experts = " + std::to_string(dims.active_experts) + " of experts = " +
              std::to_string(dims.experts) + " (need 1..experts, or 0 of 0 for dense)"),
      require(dims.active_experts <= kernels::kMaxActiveExperts,
              "active_experts = " + std::to_string(dims.active_experts) + " exceeds " +
                  std::to_string(kernels::kMaxActiveExperts) + " (the device's routing)"),
      require(dims.head_dim % 2 == 0,
              "head_dim = " + std::to_string(dims.head_dim) + " is odd (RoPE needs pairs)"),
  };
  for (Status& status : checks) {
    if (!status) {
      return tl::unexpected(status.error());
    }
  }
  return dims;
}

}  // namespace simdev
