#include "simdev/device/model/chiplet.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "calbin/bf16.hpp"
#include "simdev/device/model/kernels.hpp"

namespace simdev {

Chiplet::Chiplet(const ModelDims& dims, const ChipWeights& weights, ChipKv& kv,
                 NumericsMutant mutant)
    : dims_(dims), weights_(weights), kv_(kv), mutant_(mutant), ones_(dims.head_dim, 1.0f) {}

void Chiplet::norm_and_rope(float* head, const std::vector<float>& norm, bool ignore_norm,
                            int32_t position) {
  const size_t dim = dims_.head_dim;
  kernels::rmsnorm(head, ignore_norm ? ones_.data() : norm.data(), head, 1, dim, eps());
  if (mutant_ == NumericsMutant::rope_interleaved) {
    kernels::rope_interleaved(head, dim, position, dims_.rope_theta);
  } else {
    const double theta =
        mutant_ == NumericsMutant::rope_theta ? dims_.rope_theta / 100.0 : dims_.rope_theta;
    kernels::rope_neox(head, dim, position, theta);
  }
}

void Chiplet::project(const Int8Matrix& w, const float* in, size_t rows, size_t in_dim,
                      float* out) {
  // Dynamic W8A8: quantise each activation row on the fly, multiply in int32, rescale.
  quantized_.resize(rows * in_dim);
  act_scales_.resize(rows);
  kernels::quantize_rows(in, rows, in_dim, quantized_.data(), act_scales_.data());
  if (mutant_ == NumericsMutant::act_per_tensor) {
    kernels::quantize_rows(in, 1, rows * in_dim, quantized_.data(), act_scales_.data());
    std::fill(act_scales_.begin(), act_scales_.end(), act_scales_[0]);
  }
  kernels::int8_matmul(quantized_.data(), act_scales_.data(), rows, in_dim, w.values.data(),
                       w.scales.data(), w.rows, out);
}

void Chiplet::store_kv(size_t layer, const StepRows& step) {
  const LayerWeights& w = weights_.layers[layer];
  const size_t dim = dims_.head_dim;
  const size_t heads = dims_.kv_heads_local();
  LayerKv& cache = kv_.layers[layer];
  for (size_t r = 0; r < step.rows; ++r) {
    size_t slot = step.past + r;
    if (mutant_ == NumericsMutant::kv_slot_off && slot > 0) --slot;
    const size_t slot_base = slot * kv_.slot_stride;
    const auto to_bf16 =
        mutant_ == NumericsMutant::kv_truncated
            ? [](float f) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); }
            : [](float f) { return calbin::f32_to_bf16(f); };
    for (size_t h = 0; h < heads; ++h) {
      float* key = &k_[(r * heads + h) * dim];
      norm_and_rope(key, w.k_norm, mutant_ == NumericsMutant::k_norm_ignored, step.positions[r]);
      const float* value = &v_[(r * heads + h) * dim];
      for (size_t d = 0; d < dim; ++d) {
        cache.keys[slot_base + h * dim + d] = to_bf16(key[d]);
        cache.values[slot_base + h * dim + d] = to_bf16(value[d]);
      }
    }
  }
}

void Chiplet::stage_kv(size_t layer, size_t slot_count) {
  // Widen the BF16 cache once per layer and step; keys are transposed so the score loop
  // of attend() runs over contiguous slots.
  const size_t dim = dims_.head_dim;
  const size_t heads = dims_.kv_heads_local();
  const LayerKv& cache = kv_.layers[layer];
  k_staged_.resize(heads * dim * slot_count);
  v_staged_.resize(heads * slot_count * dim);
  for (size_t s = 0; s < slot_count; ++s) {
    for (size_t h = 0; h < heads; ++h) {
      const size_t at = s * kv_.slot_stride + h * dim;
      for (size_t d = 0; d < dim; ++d) {
        k_staged_[(h * dim + d) * slot_count + s] = calbin::bf16_to_f32(cache.keys[at + d]);
        v_staged_[(h * slot_count + s) * dim + d] = calbin::bf16_to_f32(cache.values[at + d]);
      }
    }
  }
}

void Chiplet::attention(size_t layer, const StepRows& step, size_t first_active, float* partial) {
  const LayerWeights& w = weights_.layers[layer];
  const size_t dim = dims_.head_dim;
  const size_t q_heads = dims_.q_heads_local();
  const size_t kv_heads = dims_.kv_heads_local();
  const size_t rows = step.rows;
  normed_.resize(rows * dims_.hidden);
  q_.resize(rows * q_heads * dim);
  k_.resize(rows * kv_heads * dim);
  v_.resize(rows * kv_heads * dim);
  kernels::rmsnorm(step.x, w.attn_norm.data(), normed_.data(), rows, dims_.hidden, eps());
  project(w.q_proj, normed_.data(), rows, dims_.hidden, q_.data());
  project(w.k_proj, normed_.data(), rows, dims_.hidden, k_.data());
  project(w.v_proj, normed_.data(), rows, dims_.hidden, v_.data());
  store_kv(layer, step);
  const size_t slot_count = step.past + rows;
  stage_kv(layer, slot_count);
  const size_t active = rows - first_active;
  attn_.assign(active * q_heads * dim, 0.0f);
  scores_.resize(slot_count);
  for (size_t r = first_active; r < rows; ++r) {
    for (size_t h = 0; h < q_heads; ++h) {
      float* query = &q_[(r * q_heads + h) * dim];
      norm_and_rope(query, w.q_norm, mutant_ == NumericsMutant::q_norm_ignored, step.positions[r]);
      if (mutant_ == NumericsMutant::attn_unscaled) {
        for (size_t d = 0; d < dim; ++d) query[d] *= std::sqrt(static_cast<float>(dim));
      }
      const size_t g =
          mutant_ == NumericsMutant::gqa_mapping ? h % kv_heads : h / dims_.group_size();
      // Causal: row r sees slots [0, P + r].
      kernels::attend(query, &k_staged_[g * dim * slot_count], slot_count,
                      &v_staged_[g * slot_count * dim], step.past + r + 1, dim, scores_.data(),
                      &attn_[((r - first_active) * q_heads + h) * dim]);
    }
  }
  project(w.o_proj, attn_.data(), active, q_heads * dim, partial);
}

void Chiplet::mlp(size_t layer, const float* x, size_t rows, float* partial) {
  const LayerWeights& w = weights_.layers[layer];
  const size_t ffn = dims_.ffn_local();
  normed_.resize(rows * dims_.hidden);
  gate_.resize(rows * ffn);
  up_.resize(rows * ffn);
  kernels::rmsnorm(x, w.ffn_norm.data(), normed_.data(), rows, dims_.hidden, eps());
  project(w.gate_proj, normed_.data(), rows, dims_.hidden, gate_.data());
  project(w.up_proj, normed_.data(), rows, dims_.hidden, up_.data());
  if (mutant_ == NumericsMutant::silu_as_relu) {
    for (size_t i = 0; i < rows * ffn; ++i) gate_[i] = std::max(gate_[i], 0.0f) * up_[i];
  } else {
    kernels::silu_mul(gate_.data(), up_.data(), gate_.data(), rows * ffn);
  }
  project(w.down_proj, gate_.data(), rows, ffn, partial);
}

void Chiplet::logits(const float* x, float* out) {
  normed_.resize(dims_.hidden);
  kernels::rmsnorm(x, weights_.final_norm.data(), normed_.data(), 1, dims_.hidden, eps());
  kernels::f32_matvec(normed_.data(), dims_.hidden, weights_.lm_head.data(), dims_.vocab_local(),
                      out);
}

}  // namespace simdev
