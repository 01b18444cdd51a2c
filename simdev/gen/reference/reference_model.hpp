// The independent FP32 reference of calbin/MODEL.md, from which golden outputs are computed.
//
// It is written to be read by a reviewer next to MODEL.md: unsplit dequantised weights, FP32
// activations, an FP32 KV cache, no activation quantisation, no tensor parallelism. It shares
// no code with the simulator's kernels (simdev/device), so the two check each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "calbin/result.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen::ref {

// Row-major [rows, cols]; projection matrices are [out, in] as MODEL.md stores them.
struct Matrix {
  size_t rows = 0;
  size_t cols = 0;
  std::vector<float> values;
};

// One MLP: a dense layer's, or one expert's of a mixture of experts.
struct Mlp {
  Matrix gate_proj, up_proj, down_proj;
};

struct LayerWeights {
  std::vector<float> attn_norm, q_norm, k_norm, ffn_norm;
  Matrix q_proj, k_proj, v_proj, o_proj;
  Mlp mlp;                   // dense models
  Matrix router;             // MoE: [experts, H]
  std::vector<Mlp> experts;  // MoE
};

struct Weights {
  Matrix embedding;  // [V, H]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;
  Matrix lm_head;  // [V, H]
};

// x / sqrt(mean(x^2) + eps) * weight; out may alias x.
void rmsnorm(std::span<const float> x, std::span<const float> weight, double eps,
             std::span<float> out);
// MoE routing (MODEL.md, "Mixture of experts"): the `k` experts with the largest router
// logits (the lower index first on a tie), in that order, with their weights: the softmax
// over all experts' logits, renormalised over the k when `normalise`.
struct Route {
  std::vector<uint32_t> experts;
  std::vector<float> weights;
};
Route route(std::span<const float> logits, uint32_t k, bool normalise);
// NeoX-style rotation of the pairs (i, i + D/2) by position * theta^(-2i/D), in place.
void rope(std::span<float> head, int64_t position, double theta);

// One KV head's cache. Keys are kept transposed, [D][capacity], so that a query's scores
// over all slots are one contiguous loop per dimension; values are [capacity][D].
struct KvHead {
  size_t head_dim = 0;
  size_t capacity = 0;
  std::vector<float> keys_t;
  std::vector<float> values;

  KvHead(size_t head_dim_in, size_t capacity_in);
  void store(size_t slot, std::span<const float> key, std::span<const float> value);
};

// How a query's scores over its slots become the weights of the value sum, in place; returns
// the factor the weighted sum is multiplied by afterwards (1 when the weights are normalised).
using SoftmaxRule = float (*)(std::span<float> scores, size_t head_dim);
// The FP32 reference's rule: exp(s / sqrt(D) - max), normalised after the weighted sum.
float softmax_after_sum(std::span<float> scores, size_t head_dim);

// Attention of `count` tokens: token t's query heads attend to slots [0, first_slot + t + 1)
// of their KV heads (query head h reads kv[h / (q_heads / kv_heads)]). q and out are
// [count][q_heads][D]. A score is the sum over d in order of q[d] * k[d], one rounding for
// each product and each sum; the weighted sum adds weight * value slot by slot in order. The
// order is the device contract's (calbin/MODEL.md), whatever the blocking, the instruction
// set or the threads: the two references differ only in their softmax rule.
void attend_rows(std::span<const float> q, size_t count, size_t q_heads, const KvHead* kv,
                 size_t kv_heads, size_t first_slot, SoftmaxRule softmax, std::span<float> out);

struct Prepared;  // weights rearranged for the loops in reference_model.cpp

// The immutable part: config and weights. Cheap to copy; sessions share the weights.
class Model {
 public:
  // Checks every weight's shape against the config; the error names the tensor.
  static calbin::Result<Model> create(const ModelConfig& config, const Weights& weights);
  const ModelConfig& config() const;

 private:
  friend class Session;
  std::shared_ptr<const Prepared> prepared_;
};

// One sequence: a KV cache of `context` slots per layer and KV head.
class Session {
 public:
  explicit Session(const Model& model);

  // Runs tokens at KV slots [P, P + n), P = kv_length(), each attending causally to slots
  // [0, P + t]. Returns the logits of the last token ([V]) or, with all_logits, of every
  // token ([n, V]). Fails on a context overflow, a token outside the vocabulary or a
  // negative position.
  calbin::Result<std::vector<float>> forward(std::span<const int32_t> tokens,
                                             std::span<const int32_t> positions,
                                             bool all_logits = false);
  size_t kv_length() const { return kv_length_; }

 private:
  std::shared_ptr<const Prepared> prepared_;
  std::vector<KvHead> kv_;  // [layer * kv_heads + head]
  size_t kv_length_ = 0;
};

}  // namespace simdev::gen::ref
