#include "simdev/device/model/chiplet.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>

#include "calbin/bf16.hpp"
#include "simdev/device/model/kernels.hpp"

namespace simdev {

Chiplet::Chiplet(const ModelDims& dims, const ChipWeights& weights, ChipKv& kv,
                 ChipScratch& scratch, Workers& workers, NumericsMutant mutant)
    : dims_(dims),
      weights_(weights),
      kv_(kv),
      workers_(workers),
      mutant_(mutant),
      ones_(dims.head_dim, 1.0f),
      s_(scratch) {}

void Chiplet::norm_and_rope(float* head, const std::vector<float>& norm, bool ignore_norm,
                            const StepRows& step, size_t row) {
  const size_t dim = dims_.head_dim;
  kernels::rmsnorm(head, ignore_norm ? ones_.data() : norm.data(), head, 1, dim, eps());
  const float* c = step.rope_cos + row * (dim / 2);
  const float* s = step.rope_sin + row * (dim / 2);
  if (mutant_ == NumericsMutant::rope_interleaved) {
    kernels::rope_interleaved(head, dim, c, s);
  } else {
    kernels::rope_neox(head, dim, c, s);
  }
}

void Chiplet::split(size_t count, size_t align, bool worth_it,
                    const std::function<void(size_t, size_t)>& piece) {
  const size_t parts = worth_it ? workers_.threads() : 1;
  workers_.run(parts, [&](size_t i) {
    const Range range = split_range(count, parts, i, align);
    if (range.size > 0) piece(range.first, range.size);
  });
}

void Chiplet::project(const Int8Matrix& w, const float* in, size_t rows, size_t in_dim,
                      float* out) {
  if (w.int4) {
    // W4AF16: the 16-bit activation is the BF16-rounded row (MODEL.md).
    s_.act16.resize(rows * in_dim);
    std::transform(in, in + rows * in_dim, s_.act16.begin(), calbin::round_to_bf16);
    kernels::w4af16_matmul(s_.act16.data(), rows, in_dim, w.values.data(), w.scales.data(), w.group,
                           w.rows, out);
    return;
  }
  // Dynamic W8A8: quantise each activation row on the fly, multiply in int32, rescale.
  s_.quantized.resize(rows * in_dim);
  s_.act_scales.resize(rows);
  kernels::quantize_rows(in, rows, in_dim, s_.quantized.data(), s_.act_scales.data());
  if (mutant_ == NumericsMutant::act_per_tensor) {
    kernels::quantize_rows(in, 1, rows * in_dim, s_.quantized.data(), s_.act_scales.data());
    std::fill(s_.act_scales.begin(), s_.act_scales.end(), s_.act_scales[0]);
  }
  // Blocks of 8 weight rows, the kernels' own; a hand-off costs more than a few dozen rows.
  split(w.rows, 8, w.rows >= 64, [&](size_t first, size_t count) {
    kernels::int8_matmul(s_.quantized.data(), s_.act_scales.data(), rows,
                         w.view().slice(first, count), out + first, w.rows);
  });
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
      float* key = &s_.k[(r * heads + h) * dim];
      norm_and_rope(key, w.k_norm, mutant_ == NumericsMutant::k_norm_ignored, step, r);
      const float* value = &s_.v[(r * heads + h) * dim];
      const size_t at = slot_base + h * dim;
      for (size_t d = 0; d < dim; ++d) {
        cache.keys[at + d] = to_bf16(key[d]);
      }
      if (!kv_.v_int8) {
        for (size_t d = 0; d < dim; ++d) {
          cache.values[at + d] = to_bf16(value[d]);
        }
      } else {
        // Like an activation row: one symmetric scale per head and slot (MODEL.md).
        kernels::quantize_rows(value, 1, dim, &cache.values_s8[at],
                               &cache.value_scales[slot * heads + h]);
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
  s_.k_staged.resize(heads * dim * slot_count);
  s_.v_staged.resize(heads * slot_count * dim);
  for (size_t s = 0; s < slot_count; ++s) {
    for (size_t h = 0; h < heads; ++h) {
      const size_t at = s * kv_.slot_stride + h * dim;
      float* v = &s_.v_staged[(h * slot_count + s) * dim];
      for (size_t d = 0; d < dim; ++d) {
        s_.k_staged[(h * dim + d) * slot_count + s] = calbin::bf16_to_f32(cache.keys[at + d]);
      }
      if (kv_.v_int8) {
        const float scale = cache.value_scales[s * heads + h];
        for (size_t d = 0; d < dim; ++d) {
          v[d] = static_cast<float>(cache.values_s8[at + d]) * scale;
        }
      } else {
        for (size_t d = 0; d < dim; ++d) {
          v[d] = calbin::bf16_to_f32(cache.values[at + d]);
        }
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
  s_.normed.resize(rows * dims_.hidden);
  s_.q.resize(rows * q_heads * dim);
  s_.k.resize(rows * kv_heads * dim);
  s_.v.resize(rows * kv_heads * dim);
  kernels::rmsnorm(step.x, w.attn_norm.data(), s_.normed.data(), rows, dims_.hidden, eps());
  project(w.q_proj, s_.normed.data(), rows, dims_.hidden, s_.q.data());
  project(w.k_proj, s_.normed.data(), rows, dims_.hidden, s_.k.data());
  project(w.v_proj, s_.normed.data(), rows, dims_.hidden, s_.v.data());
  store_kv(layer, step);
  const size_t slot_count = step.past + rows;
  stage_kv(layer, slot_count);
  const size_t active = rows - first_active;
  s_.attn.assign(active * q_heads * dim, 0.0f);
  s_.scores.resize(workers_.threads());
  for (auto& scores : s_.scores) scores.resize(slot_count);
  // Each (row, head) pair is independent: its own query, output and scores buffer.
  std::atomic<size_t> part{0};
  const size_t pairs = active * q_heads;
  split(pairs, 1, pairs >= 2 && pairs * slot_count * dim >= (size_t{1} << 16),
        [&](size_t first, size_t count) {
          float* scores = s_.scores[part++].data();
          for (size_t pair = first; pair < first + count; ++pair) {
            const size_t r = first_active + pair / q_heads;
            const size_t h = pair % q_heads;
            float* query = &s_.q[(r * q_heads + h) * dim];
            norm_and_rope(query, w.q_norm, mutant_ == NumericsMutant::q_norm_ignored, step, r);
            if (mutant_ == NumericsMutant::attn_unscaled) {
              for (size_t d = 0; d < dim; ++d) query[d] *= std::sqrt(static_cast<float>(dim));
            }
            const size_t g =
                mutant_ == NumericsMutant::gqa_mapping ? h % kv_heads : h / dims_.group_size();
            // Causal: row r sees slots [0, P + r].
            kernels::attend(query, &s_.k_staged[g * dim * slot_count], slot_count,
                            &s_.v_staged[g * slot_count * dim], step.past + r + 1, dim, scores,
                            &s_.attn[((r - first_active) * q_heads + h) * dim]);
          }
        });
  project(w.o_proj, s_.attn.data(), active, q_heads * dim, partial);
}

void Chiplet::swiglu(const MlpWeights& w, const float* normed, size_t rows, float* partial) {
  const size_t ffn = dims_.ffn_local();
  s_.gate.resize(rows * ffn);
  s_.up.resize(rows * ffn);
  project(w.gate_proj, normed, rows, dims_.hidden, s_.gate.data());
  project(w.up_proj, normed, rows, dims_.hidden, s_.up.data());
  if (mutant_ == NumericsMutant::silu_as_relu) {
    for (size_t i = 0; i < rows * ffn; ++i) s_.gate[i] = std::max(s_.gate[i], 0.0f) * s_.up[i];
  } else {
    kernels::silu_mul(s_.gate.data(), s_.up.data(), s_.gate.data(), rows * ffn);
  }
  project(w.down_proj, s_.gate.data(), rows, ffn, partial);
}

void Chiplet::moe(const LayerWeights& w, size_t rows, float* partial) {
  const size_t hidden = dims_.hidden, experts = dims_.experts, k = dims_.active_experts;
  s_.router_logits.resize(rows * experts);
  s_.route_ids.resize(rows * k);
  s_.route_weights.resize(rows * k);
  const bool normalise = dims_.norm_topk_prob && mutant_ != NumericsMutant::router_unnormalised;
  for (size_t r = 0; r < rows; ++r) {
    kernels::f32_matvec(&s_.normed[r * hidden], hidden, w.router.data(), experts,
                        &s_.router_logits[r * experts]);
    kernels::route_top_k(&s_.router_logits[r * experts], experts, k, normalise,
                         &s_.route_ids[r * k], &s_.route_weights[r * k]);
    if (mutant_ == NumericsMutant::expert_weights_reversed) {
      std::reverse(s_.route_weights.begin() + static_cast<std::ptrdiff_t>(r * k),
                   s_.route_weights.begin() + static_cast<std::ptrdiff_t>((r + 1) * k));
    }
  }
  std::fill(partial, partial + rows * hidden, 0.0f);
  // Grouped by expert: an expert's rows go through its GEMMs together, as on the NPU. Rows
  // are quantised one by one, so grouping does not change a row's numbers.
  for (uint32_t e = 0; e < experts; ++e) {
    s_.expert_rows.clear();
    s_.expert_row_weights.clear();
    for (size_t r = 0; r < rows; ++r) {
      for (size_t j = 0; j < k; ++j) {
        if (s_.route_ids[r * k + j] == e) {
          s_.expert_rows.push_back(static_cast<uint32_t>(r));
          s_.expert_row_weights.push_back(s_.route_weights[r * k + j]);
        }
      }
    }
    const size_t n = s_.expert_rows.size();
    if (n == 0) continue;
    s_.expert_in.resize(n * hidden);
    for (size_t i = 0; i < n; ++i) {
      std::copy_n(&s_.normed[s_.expert_rows[i] * hidden], hidden, &s_.expert_in[i * hidden]);
    }
    s_.expert_out.resize(n * hidden);
    swiglu(w.experts[e], s_.expert_in.data(), n, s_.expert_out.data());
    for (size_t i = 0; i < n; ++i) {
      float* out = partial + s_.expert_rows[i] * hidden;
      const float weight = s_.expert_row_weights[i];
      for (size_t d = 0; d < hidden; ++d) out[d] += weight * s_.expert_out[i * hidden + d];
    }
  }
}

void Chiplet::mlp(size_t layer, const float* x, size_t rows, float* partial) {
  const LayerWeights& w = weights_.layers[layer];
  s_.normed.resize(rows * dims_.hidden);
  kernels::rmsnorm(x, w.ffn_norm.data(), s_.normed.data(), rows, dims_.hidden, eps());
  if (dims_.experts == 0) {
    swiglu(w.mlp, s_.normed.data(), rows, partial);
  } else {
    moe(w, rows, partial);
  }
}

void Chiplet::logits(const float* x, float* out) {
  s_.normed.resize(dims_.hidden);
  kernels::rmsnorm(x, weights_.final_norm.data(), s_.normed.data(), 1, dims_.hidden, eps());
  kernels::bf16_matvec(s_.normed.data(), dims_.hidden, weights_.lm_head.data(), dims_.vocab_local(),
                       out);
}

}  // namespace simdev
