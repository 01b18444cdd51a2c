// The device-contract reference: the logits a device must produce under calbin/MODEL.md's
// declared numerics ("The device contract"), not the FP32 model's. Each chip quantises its
// own input of every int8 matmul per token, products accumulate in int32, the KV cache holds
// BF16 (or int8 V with a scale per slot and head), partial sums meet in an FP32 all-reduce in chip
// order, and the logits are BF16.
//
// It follows MODEL.md's order of every reduction, so a correct device's logits equal it bit
// for bit and an error far smaller than the quantisation's own noise shows. It reads the
// weights from the calbin's files and shares no code with the simulator's kernels
// (simdev/device); it shares rmsnorm with the FP32 reference, and has its own RoPE,
// attention and dot products in the device's FP32 order.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "calbin/result.hpp"
#include "simdev/gen/model_config.hpp"
#include "simdev/gen/reference/calbin_weights.hpp"

namespace simdev::gen::contract {

struct Prepared;

class Model {
 public:
  // Takes every tensor of MODEL.md from `weights`; the error names a missing or misshapen one.
  static calbin::Result<Model> create(const ModelConfig& config, const ref::CalbinWeights& weights);
  const ModelConfig& config() const;

 private:
  friend class Session;
  std::shared_ptr<const Prepared> prepared_;
};

// One sequence, as ref::Session: tokens at KV slots [P, P + n), causal attention.
class Session {
 public:
  explicit Session(const Model& model);
  // The last token's logits ([V]), each a BF16 value widened to FP32.
  calbin::Result<std::vector<float>> forward(std::span<const int32_t> tokens,
                                             std::span<const int32_t> positions);
  size_t kv_length() const { return kv_length_; }
  // The last token's residual stream at the CALRT_EXT_PROBE points of the last forward call
  // (abi/calrt_ext.h): [2 * layers + 1][hidden], the embedding row, then after each layer's
  // attention and after its MLP.
  const std::vector<float>& probes() const { return probes_; }

 private:
  std::shared_ptr<const Prepared> prepared_;
  std::vector<float> probes_;
  std::vector<ref::KvHead> kv_;  // [layer * kv_heads + head], values already rounded as stored
  size_t kv_length_ = 0;
};

}  // namespace simdev::gen::contract
