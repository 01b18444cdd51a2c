// The FP32 reference forward pass of calbin/MODEL.md, a block of tokens at a time.
#include "simdev/gen/reference/reference_model.hpp"
#include "simdev/gen/reference/wide_loops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace simdev::gen::ref {

// W^T, [in][out]: y += x[i] * row i is a contiguous loop over outputs that the compiler
// vectorises without reassociating any sum, so results stay exactly reproducible.
struct Transposed {
  size_t in = 0;
  size_t out = 0;
  std::vector<float> values;
};

struct PreparedMlp {
  Transposed gate_proj, up_proj, down_proj;
};

struct PreparedLayer {
  std::vector<float> attn_norm, q_norm, k_norm, ffn_norm;
  Transposed q_proj, k_proj, v_proj, o_proj;
  PreparedMlp mlp;
  Transposed router;
  std::vector<PreparedMlp> experts;
};

struct Prepared {
  ModelConfig config;
  Matrix embedding;
  std::vector<PreparedLayer> layers;
  std::vector<float> final_norm;
  Transposed lm_head;
};

namespace {

Transposed transpose(const Matrix& m) {
  Transposed t{m.cols, m.rows, std::vector<float>(m.values.size())};
  for (size_t r = 0; r < m.rows; ++r) {
    for (size_t c = 0; c < m.cols; ++c) {
      t.values[c * m.rows + r] = m.values[r * m.cols + c];
    }
  }
  return t;
}

// y[t][o] = sum over i, in index order, of x[t][i] * w[i][o], for outputs [o0, o1). Blocks of
// 4 tokens by 64 outputs keep their sums in registers while the inputs stream past; blocks
// change only which outputs are computed together, never the order of one output's additions.
SIMDEV_REFERENCE_WIDE_LOOPS
void matmul_into(const float* x, size_t count, const Transposed& w, size_t o0, size_t o1,
                 float* y) {
  // 16 floats in one vector value: lane-wise IEEE products and sums, which the compiler keeps
  // in registers (a zmm each on AVX-512, four xmm elsewhere).
  using Lanes = float __attribute__((vector_size(64)));
  constexpr size_t kTokens = 4, kVectors = 4, kOutputs = kVectors * 16;
  size_t t0 = 0;
  for (; t0 + kTokens <= count; t0 += kTokens) {
    size_t o = o0;
    for (; o + kOutputs <= o1; o += kOutputs) {
      Lanes acc[kTokens][kVectors] = {};
      for (size_t i = 0; i < w.in; ++i) {
        const float* w_row = w.values.data() + i * w.out + o;
        Lanes wv[kVectors];
        std::memcpy(wv, w_row, sizeof wv);
        for (size_t t = 0; t < kTokens; ++t) {
          const Lanes xi = x[(t0 + t) * w.in + i] - Lanes{};  // x - 0 is x, -0 included
          for (size_t v = 0; v < kVectors; ++v) acc[t][v] += xi * wv[v];
        }
      }
      for (size_t t = 0; t < kTokens; ++t) {
        std::memcpy(y + (t0 + t) * w.out + o, acc[t], sizeof acc[t]);
      }
    }
    for (size_t i = 0; o < o1 && i < w.in; ++i) {
      const float* w_row = w.values.data() + i * w.out;
      for (size_t t = t0; t < t0 + kTokens; ++t) {
        const float xi = x[t * w.in + i];
        for (size_t j = o; j < o1; ++j) y[t * w.out + j] += xi * w_row[j];
      }
    }
  }
  for (size_t i = 0; t0 < count && i < w.in; ++i) {
    const float* w_row = w.values.data() + i * w.out;
    for (size_t t = t0; t < count; ++t) {
      const float xi = x[t * w.in + i];
      for (size_t j = o0; j < o1; ++j) y[t * w.out + j] += xi * w_row[j];
    }
  }
}

std::vector<float> matmul(const std::vector<float>& x, size_t count, const Transposed& w) {
  std::vector<float> y(count * w.out, 0.0f);
  split_two(w.out, [&](size_t first, size_t size) {
    matmul_into(x.data(), count, w, first, first + size, y.data());
  });
  return y;
}

void add_into(std::vector<float>& x, const std::vector<float>& update) {
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] += update[i];
  }
}

// rmsnorm applied to each `width`-sized piece of x.
std::vector<float> rmsnorm_rows(const std::vector<float>& x, const std::vector<float>& weight,
                                double eps) {
  std::vector<float> out(x.size());
  const size_t width = weight.size();
  for (size_t at = 0; at < x.size(); at += width) {
    rmsnorm(std::span(x).subspan(at, width), weight, eps, std::span(out).subspan(at, width));
  }
  return out;
}

calbin::Result<void> check_matrix(const std::string& name, const Matrix& m, size_t rows,
                                  size_t cols) {
  if (m.rows != rows || m.cols != cols || m.values.size() != rows * cols) {
    return calbin::fail("reference", name,
                        "shape [" + std::to_string(m.rows) + ", " + std::to_string(m.cols) +
                            "], expected [" + std::to_string(rows) + ", " + std::to_string(cols) +
                            "]");
  }
  return {};
}

calbin::Result<void> check_vector(const std::string& name, const std::vector<float>& v,
                                  size_t size) {
  if (v.size() != size) {
    return calbin::fail("reference", name,
                        "size " + std::to_string(v.size()) + ", expected " + std::to_string(size));
  }
  return {};
}

calbin::Result<void> check_layer(const ModelConfig& c, size_t l, const LayerWeights& w) {
  const std::string p = "layers." + std::to_string(l) + ".";
  const size_t h = c.hidden, q = size_t{c.q_heads} * c.head_dim;
  const size_t kv = size_t{c.kv_heads} * c.head_dim, f = c.ffn;
  const calbin::Result<void> checks[] = {
      check_vector(p + "attn_norm", w.attn_norm, h),
      check_vector(p + "attn.q_norm", w.q_norm, c.head_dim),
      check_vector(p + "attn.k_norm", w.k_norm, c.head_dim),
      check_vector(p + "ffn_norm", w.ffn_norm, h),
      check_matrix(p + "attn.q_proj", w.q_proj, q, h),
      check_matrix(p + "attn.k_proj", w.k_proj, kv, h),
      check_matrix(p + "attn.v_proj", w.v_proj, kv, h),
      check_matrix(p + "attn.o_proj", w.o_proj, h, q),
  };
  for (const auto& check : checks) {
    if (!check) {
      return check;
    }
  }
  auto check_mlp = [&](const std::string& at, const Mlp& mlp) -> calbin::Result<void> {
    if (auto r = check_matrix(at + "gate_proj", mlp.gate_proj, f, h); !r) return r;
    if (auto r = check_matrix(at + "up_proj", mlp.up_proj, f, h); !r) return r;
    return check_matrix(at + "down_proj", mlp.down_proj, h, f);
  };
  if (c.experts == 0) return check_mlp(p + "mlp.", w.mlp);
  if (auto r = check_matrix(p + "mlp.gate", w.router, c.experts, h); !r) return r;
  if (w.experts.size() != c.experts) {
    return calbin::fail(
        "reference", p + "mlp.experts",
        std::to_string(w.experts.size()) + " experts, expected " + std::to_string(c.experts));
  }
  for (size_t e = 0; e < w.experts.size(); ++e) {
    if (auto r = check_mlp(p + "mlp.experts." + std::to_string(e) + ".", w.experts[e]); !r) {
      return r;
    }
  }
  return {};
}

calbin::Result<void> check_weights(const ModelConfig& c, const Weights& w) {
  if (w.layers.size() != c.layers) {
    return calbin::fail(
        "reference", "layers",
        std::to_string(w.layers.size()) + " layers, expected " + std::to_string(c.layers));
  }
  for (size_t l = 0; l < w.layers.size(); ++l) {
    if (auto r = check_layer(c, l, w.layers[l]); !r) {
      return r;
    }
  }
  if (auto r = check_matrix("tok_embeddings", w.embedding, c.vocab, c.hidden); !r) {
    return r;
  }
  if (auto r = check_vector("final_norm", w.final_norm, c.hidden); !r) {
    return r;
  }
  return check_matrix("lm_head", w.lm_head, c.vocab, c.hidden);
}

PreparedMlp prepare_mlp(const Mlp& m) {
  return PreparedMlp{transpose(m.gate_proj), transpose(m.up_proj), transpose(m.down_proj)};
}

PreparedLayer prepare_layer(const LayerWeights& w) {
  PreparedLayer p{w.attn_norm,
                  w.q_norm,
                  w.k_norm,
                  w.ffn_norm,
                  transpose(w.q_proj),
                  transpose(w.k_proj),
                  transpose(w.v_proj),
                  transpose(w.o_proj),
                  prepare_mlp(w.mlp),
                  transpose(w.router),
                  {}};
  for (const Mlp& expert : w.experts) p.experts.push_back(prepare_mlp(expert));
  return p;
}

}  // namespace

calbin::Result<Model> Model::create(const ModelConfig& config, const Weights& weights) {
  if (auto r = check_config(config); !r) {
    return tl::unexpected(r.error());
  }
  if (auto r = check_weights(config, weights); !r) {
    return tl::unexpected(r.error());
  }
  auto prepared = std::make_shared<Prepared>();
  prepared->config = config;
  prepared->embedding = weights.embedding;
  for (const LayerWeights& layer : weights.layers) {
    prepared->layers.push_back(prepare_layer(layer));
  }
  prepared->final_norm = weights.final_norm;
  prepared->lm_head = transpose(weights.lm_head);
  Model model;
  model.prepared_ = std::move(prepared);
  return model;
}

const ModelConfig& Model::config() const { return prepared_->config; }

Session::Session(const Model& model) : prepared_(model.prepared_) {
  const ModelConfig& c = prepared_->config;
  kv_.assign(size_t{c.layers} * c.kv_heads, KvHead(c.head_dim, c.context));
}

namespace {

// Per head: q_norm/k_norm, then RoPE at the token's position (MODEL.md order).
void normalise_and_rotate(std::vector<float>& heads, size_t count, size_t head_count,
                          const std::vector<float>& norm, std::span<const int32_t> positions,
                          const ModelConfig& c) {
  const size_t d = c.head_dim;
  for (size_t t = 0; t < count; ++t) {
    for (size_t h = 0; h < head_count; ++h) {
      const std::span<float> head = std::span(heads).subspan((t * head_count + h) * d, d);
      rmsnorm(head, norm, c.rms_eps, head);
      rope(head, positions[t], c.rope_theta);
    }
  }
}

// The attention half of a layer for `count` tokens at KV slots [past, past + count).
std::vector<float> attention(const PreparedLayer& w, const std::vector<float>& x, size_t count,
                             std::span<const int32_t> positions, size_t past, KvHead* kv,
                             const ModelConfig& c) {
  const size_t d = c.head_dim, hq = c.q_heads, hkv = c.kv_heads;
  const std::vector<float> h = rmsnorm_rows(x, w.attn_norm, c.rms_eps);
  std::vector<float> q = matmul(h, count, w.q_proj);
  std::vector<float> k = matmul(h, count, w.k_proj);
  const std::vector<float> v = matmul(h, count, w.v_proj);
  normalise_and_rotate(q, count, hq, w.q_norm, positions, c);
  normalise_and_rotate(k, count, hkv, w.k_norm, positions, c);
  std::vector<float> attended(count * hq * d);
  // Every token's K and V first: token t still attends to slots [0, past + t] only.
  for (size_t t = 0; t < count; ++t) {
    for (size_t g = 0; g < hkv; ++g) {
      const size_t at = (t * hkv + g) * d;
      kv[g].store(past + t, std::span(k).subspan(at, d), std::span(v).subspan(at, d));
    }
  }
  attend_rows(q, count, hq, kv, hkv, past, softmax_after_sum, attended);
  return matmul(attended, count, w.o_proj);
}

std::vector<float> swiglu(const PreparedMlp& w, const std::vector<float>& h, size_t count) {
  std::vector<float> gate = matmul(h, count, w.gate_proj);
  const std::vector<float> up = matmul(h, count, w.up_proj);
  for (size_t i = 0; i < gate.size(); ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
  return matmul(gate, count, w.down_proj);
}

// Each token through its routed experts, weighted and summed in FP32 (MODEL.md).
std::vector<float> moe(const PreparedLayer& w, const std::vector<float>& h, size_t count,
                       const ModelConfig& c) {
  const std::vector<float> logits = matmul(h, count, w.router);
  std::vector<float> out(count * c.hidden, 0.0f);
  for (size_t t = 0; t < count; ++t) {
    const Route r = route(std::span(logits).subspan(t * c.experts, c.experts), c.active_experts,
                          c.norm_topk_prob);
    const std::vector<float> row(h.begin() + static_cast<std::ptrdiff_t>(t * c.hidden),
                                 h.begin() + static_cast<std::ptrdiff_t>((t + 1) * c.hidden));
    for (size_t j = 0; j < r.experts.size(); ++j) {
      const std::vector<float> y = swiglu(w.experts[r.experts[j]], row, 1);
      for (size_t i = 0; i < c.hidden; ++i) out[t * c.hidden + i] += r.weights[j] * y[i];
    }
  }
  return out;
}

std::vector<float> mlp(const PreparedLayer& w, const std::vector<float>& x, size_t count,
                       const ModelConfig& c) {
  const std::vector<float> h = rmsnorm_rows(x, w.ffn_norm, c.rms_eps);
  return c.experts == 0 ? swiglu(w.mlp, h, count) : moe(w, h, count, c);
}

calbin::Result<void> check_inputs(std::span<const int32_t> tokens,
                                  std::span<const int32_t> positions, size_t past,
                                  const ModelConfig& c) {
  if (tokens.empty() || tokens.size() != positions.size()) {
    return calbin::fail("reference", "tokens",
                        std::to_string(tokens.size()) + " tokens with " +
                            std::to_string(positions.size()) + " positions");
  }
  if (past + tokens.size() > c.context) {
    return calbin::fail("reference", "kv",
                        std::to_string(past) + " + " + std::to_string(tokens.size()) +
                            " tokens exceed the context " + std::to_string(c.context));
  }
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || static_cast<uint32_t>(tokens[t]) >= c.vocab || positions[t] < 0) {
      return calbin::fail("reference", "tokens[" + std::to_string(t) + "]",
                          "token " + std::to_string(tokens[t]) + " at position " +
                              std::to_string(positions[t]) + " is out of range");
    }
  }
  return {};
}

}  // namespace

calbin::Result<std::vector<float>> Session::forward(std::span<const int32_t> tokens,
                                                    std::span<const int32_t> positions,
                                                    bool all_logits) {
  const ModelConfig& c = prepared_->config;
  if (auto r = check_inputs(tokens, positions, kv_length_, c); !r) {
    return tl::unexpected(r.error());
  }
  const size_t count = tokens.size(), hidden = c.hidden;
  std::vector<float> x(count * hidden);
  for (size_t t = 0; t < count; ++t) {
    const float* row = prepared_->embedding.values.data() + size_t(tokens[t]) * hidden;
    std::copy(row, row + hidden, x.begin() + static_cast<std::ptrdiff_t>(t * hidden));
  }
  for (size_t l = 0; l < c.layers; ++l) {
    const PreparedLayer& w = prepared_->layers[l];
    add_into(x, attention(w, x, count, positions, kv_length_, &kv_[l * c.kv_heads], c));
    add_into(x, mlp(w, x, count, c));
  }
  kv_length_ += count;
  // Only the rows whose logits are wanted go through the final norm and lm_head.
  const size_t first = all_logits ? 0 : count - 1;
  const std::vector<float> rows(x.begin() + static_cast<std::ptrdiff_t>(first * hidden), x.end());
  const std::vector<float> normed = rmsnorm_rows(rows, prepared_->final_norm, c.rms_eps);
  return matmul(normed, count - first, prepared_->lm_head);
}

}  // namespace simdev::gen::ref
