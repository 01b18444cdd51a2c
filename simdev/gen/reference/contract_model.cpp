// The device-contract forward pass (calbin/MODEL.md, "The device contract"), one token at a
// time: with per-token quantisation and a BF16 cache a token's result does not depend on how
// the prompt is cut into chunks, so one token at a time is the plainest correct order.
#include "simdev/gen/reference/contract_model.hpp"
#include "simdev/gen/reference/wide_loops.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "calbin/bf16.hpp"

namespace simdev::gen::contract {

namespace {

// A quantised matrix, unsplit: [out, in], w8a8_dynamic (int8, one scale per output row) or
// w4af16 (int4, one scale per `group` inputs of a row).
struct QuantWeight {
  size_t out = 0;
  size_t in = 0;
  bool int4 = false;
  size_t group = 0;  // inputs per scale (in for w8a8_dynamic)
  std::vector<int8_t> q;
  std::vector<float> scales;  // [out][in / group]
};

struct QuantMlp {
  QuantWeight gate_proj, up_proj, down_proj;
};

struct PreparedLayer {
  std::vector<float> attn_norm, q_norm, k_norm, ffn_norm;
  QuantWeight q_proj, k_proj, v_proj, o_proj;
  QuantMlp mlp;                   // dense models
  ref::Matrix router;             // MoE: [experts, H], BF16 values
  std::vector<QuantMlp> experts;  // MoE
};

}  // namespace

struct Prepared {
  ModelConfig config;
  ref::Matrix embedding;  // [V, H]
  std::vector<PreparedLayer> layers;
  std::vector<float> final_norm;
  ref::Matrix lm_head;  // [V, H], BF16 values
};

namespace {

calbin::Result<const ref::FileTensor*> tensor(const ref::CalbinWeights& weights,
                                              const std::string& name, std::vector<int64_t> shape,
                                              bool quantised) {
  const ref::FileTensor* t = weights.find(name);
  if (t == nullptr || t->shape != shape || t->quantised != quantised) {
    // MODEL.md's table says which tensors are quantised; int8 or int4 is the calbin's choice.
    std::string want;
    for (const int64_t d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
    return calbin::fail("contract reference", name,
                        std::string(t == nullptr ? "missing" : "misshapen") + "; MODEL.md needs [" +
                            want + "]" + (quantised ? " int8 w8a8_dynamic" : " bf16"));
  }
  return t;
}

// Per-token symmetric int8 (MODEL.md): s = max|x| / 127, q = round-half-even(x * (1 / s)),
// clamped to [-127, 127]; a zero row has s = 0 and all-zero q.
float quantise(std::span<const float> x, std::vector<int8_t>& q) {
  float max_abs = 0.0f;
  for (const float v : x) max_abs = std::max(max_abs, std::fabs(v));
  const float scale = max_abs / 127.0f;
  const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
  q.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    q[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] * inverse), -127.0f, 127.0f));
  }
  return scale;
}

std::vector<float> bf16_rounded(std::span<const float> values) {
  std::vector<float> out(values.size());
  std::transform(values.begin(), values.end(), out.begin(), calbin::round_to_bf16);
  return out;
}

// The FP32 dot product of MODEL.md ("Order of every reduction"): 16 partial sums, input i
// added to sum i mod 16 in index order, then the sums folded as a halving tree. Whole blocks
// of 16 inputs add one product to each sum, which the compiler vectorises: the order is the
// same as one input at a time.
SIMDEV_REFERENCE_WIDE_LOOPS
float dot(std::span<const float> x, const float* w) {
  constexpr size_t kLanes = 16;
  std::array<float, kLanes> lane{};
  size_t i = 0;
  for (; i + kLanes <= x.size(); i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lane[j] += x[i + j] * w[i + j];
  }
  for (; i < x.size(); ++i) {
    const float product = x[i] * w[i];
    lane[i % kLanes] += product;
  }
  for (size_t width = kLanes / 2; width > 0; width /= 2) {
    for (size_t j = 0; j < width; ++j) lane[j] += lane[j + width];
  }
  return lane[0];
}

// NeoX RoPE as MODEL.md gives the device: angle, cosine and sine in double, rounded to FP32,
// the rotation in FP32.
void rope(std::span<float> head, int64_t position, double theta) {
  const size_t half = head.size() / 2;
  // The angles depend on the position alone: a token's heads in every layer share them.
  thread_local std::vector<float> cosines, sines;
  thread_local int64_t at_position = -1;
  thread_local double at_theta = 0.0;
  if (position != at_position || theta != at_theta || cosines.size() != half) {
    const auto dim = static_cast<double>(head.size());
    cosines.resize(half);
    sines.resize(half);
    for (size_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(position) * std::pow(theta, -2.0 * static_cast<double>(i) / dim);
      cosines[i] = static_cast<float>(std::cos(angle));
      sines[i] = static_cast<float>(std::sin(angle));
    }
    at_position = position;
    at_theta = theta;
  }
  for (size_t i = 0; i < half; ++i) {
    const float cos_a = cosines[i], sin_a = sines[i];
    const float a = head[i];
    const float b = head[i + half];
    const float a_cos = a * cos_a, b_sin = b * sin_a, a_sin = a * sin_a, b_cos = b * cos_a;
    head[i] = a_cos - b_sin;
    head[i + half] = a_sin + b_cos;
  }
}

// The contract's softmax (MODEL.md, "Attention"; the scores and the weighted sum are
// ref::attend_rows's, in MODEL.md's order): each score times float(1 / sqrt(D)),
// e = exp(score - max) in FP32 summed in double in slot order, p = e * float(1 / sum).
float normalised_softmax(std::span<float> weight, size_t head_dim) {
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  float top = -std::numeric_limits<float>::infinity();
  for (float& w : weight) {
    w = w * scale;
    top = std::max(top, w);
  }
  double sum = 0.0;
  for (float& w : weight) {
    w = std::exp(w - top);
    sum += w;
  }
  const auto inverse = static_cast<float>(1.0 / sum);
  for (float& w : weight) w = w * inverse;
  return 1.0f;
}

// w4af16: x rounded to BF16; per group, the exact products float(q) * x16 summed in FP32 in
// index order; the output sums group_sum * scale in FP32 in group order.
void int4_chip_product(std::span<const float> x, const QuantWeight& w, size_t first,
                       std::vector<float>& y) {
  const std::vector<float> x16 = bf16_rounded(x);
  const size_t per_row = w.in / w.group;
  y.resize(w.out);
  for (size_t o = 0; o < w.out; ++o) {
    float acc = 0.0f;
    for (size_t g0 = 0; g0 < x16.size(); g0 += w.group) {
      float group_sum = 0.0f;
      for (size_t i = g0; i < g0 + w.group; ++i) {
        group_sum += static_cast<float>(w.q[o * w.in + first + i]) * x16[i];
      }
      acc += group_sum * w.scales[o * per_row + (first + g0) / w.group];
    }
    y[o] = acc;
  }
}

// The int32 sums of q against rows [0, out) of w, over inputs [first, first + q.size()).
SIMDEV_REFERENCE_WIDE_LOOPS
void int8_sums(const std::vector<int8_t>& q, const QuantWeight& w, size_t first, int32_t* sums) {
  for (size_t o = 0; o < w.out; ++o) {
    const int8_t* row = w.q.data() + o * w.in + first;
    int32_t acc = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      acc += int32_t{q[i]} * int32_t{row[i]};
    }
    sums[o] = acc;
  }
}

// sums[t][o] for rows t of q (each `len` long) against weight rows o in [o0, o1), over inputs
// [first, first + len). Blocks of 8 rows read each weight row once per block.
SIMDEV_REFERENCE_WIDE_LOOPS
void int8_sums_rows(const int8_t* q, size_t n, size_t len, const QuantWeight& w, size_t first,
                    size_t o0, size_t o1, int32_t* sums) {
  constexpr size_t kRows = 8;
  for (size_t t0 = 0; t0 < n; t0 += kRows) {
    const size_t t_end = t0 + kRows < n ? t0 + kRows : n;
    for (size_t o = o0; o < o1; ++o) {
      const int8_t* row = w.q.data() + o * w.in + first;
      for (size_t t = t0; t < t_end; ++t) {
        const int8_t* qt = q + t * len;
        int32_t acc = 0;
        for (size_t i = 0; i < len; ++i) acc += int32_t{qt[i]} * int32_t{row[i]};
        sums[t * w.out + o] = acc;
      }
    }
  }
}

// chip_product for each of n rows of x (each `len` long, at columns [first, first + len)):
// each row quantised on its own, as one token at a time is. y is [n][w.out].
void chip_product_rows(const float* x, size_t n, size_t len, const QuantWeight& w, size_t first,
                       std::vector<float>& y) {
  y.resize(n * w.out);
  if (w.int4) {
    std::vector<float> one;
    for (size_t t = 0; t < n; ++t) {
      int4_chip_product(std::span(x + t * len, len), w, first, one);
      std::copy(one.begin(), one.end(), y.begin() + static_cast<std::ptrdiff_t>(t * w.out));
    }
    return;
  }
  std::vector<int8_t> q(n * len), row_q;
  std::vector<float> scales(n);
  for (size_t t = 0; t < n; ++t) {
    scales[t] = quantise(std::span(x + t * len, len), row_q);
    std::copy(row_q.begin(), row_q.end(), q.begin() + static_cast<std::ptrdiff_t>(t * len));
  }
  std::vector<int32_t> sums(n * w.out);
  split_two(w.out, [&](size_t o0, size_t count) {
    int8_sums_rows(q.data(), n, len, w, first, o0, o0 + count, sums.data());
  });
  for (size_t t = 0; t < n; ++t) {
    for (size_t o = 0; o < w.out; ++o) {
      y[t * w.out + o] = static_cast<float>(sums[t * w.out + o]) * scales[t] * w.scales[o];
    }
  }
}

// One chip's share of x @ w^T: its input columns [first, first + x.size()). w8a8_dynamic:
// quantised on their own, multiplied in int32 and rescaled as float(acc) * s_x * s_w[o].
void chip_product(std::span<const float> x, const QuantWeight& w, size_t first,
                  std::vector<float>& y) {
  if (w.int4) {
    int4_chip_product(x, w, first, y);
    return;
  }
  thread_local std::vector<int8_t> q;
  thread_local std::vector<int32_t> sums;
  const float scale = quantise(x, q);
  sums.resize(w.out);
  int8_sums(q, w, first, sums.data());
  y.resize(w.out);
  for (size_t o = 0; o < w.out; ++o) {
    y[o] = static_cast<float>(sums[o]) * scale * w.scales[o];
  }
}

// A weight split on axis 0 (output rows): every chip quantises the same whole input, so the
// chips together compute exactly the unsplit product.
std::vector<float> rows_product(std::span<const float> x, const QuantWeight& w) {
  std::vector<float> y;
  chip_product(x, w, 0, y);
  return y;
}

// The D2D all-reduce: the chips' partial sums added in FP32 in chip order, then added to
// the residual stream.
void all_reduce_into(const std::vector<std::vector<float>>& partials, std::span<float> x) {
  for (size_t i = 0; i < x.size(); ++i) {
    float sum = 0.0f;
    for (const auto& partial : partials) sum += partial[i];
    x[i] += sum;
  }
}

// A weight split on axis 1 (input columns), for n rows: x is [n][w.in], x_out [n][w.out].
// Chip c quantises its slice of each row on its own, and the partial sums are added row by
// row in FP32 in chip order (the D2D all-reduce) into the residual stream x_out.
void columns_product_rows_into(const std::vector<float>& x, size_t n, const QuantWeight& w,
                               uint32_t chips, std::vector<float>& x_out) {
  std::vector<std::vector<float>> partials(chips);
  std::vector<float> slice;
  for (uint32_t c = 0; c < chips; ++c) {
    const size_t first = c * w.in / chips;
    const size_t len = (c + 1) * w.in / chips - first;
    slice.resize(n * len);
    for (size_t t = 0; t < n; ++t) {
      std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(t * w.in + first), len,
                  slice.begin() + static_cast<std::ptrdiff_t>(t * len));
    }
    chip_product_rows(slice.data(), n, len, w, first, partials[c]);
  }
  std::vector<std::vector<float>> row(chips);
  for (size_t t = 0; t < n; ++t) {
    for (uint32_t c = 0; c < chips; ++c) {
      row[c].assign(partials[c].begin() + static_cast<std::ptrdiff_t>(t * w.out),
                    partials[c].begin() + static_cast<std::ptrdiff_t>((t + 1) * w.out));
    }
    all_reduce_into(row, std::span(x_out).subspan(t * w.out, w.out));
  }
}

}  // namespace

calbin::Result<Model> Model::create(const ModelConfig& c, const ref::CalbinWeights& weights) {
  if (auto checked = check_config(c); !checked) {
    return tl::unexpected(checked.error());
  }
  auto prepared = std::make_shared<Prepared>();
  prepared->config = c;
  calbin::Result<void> ok;
  const auto h = int64_t{c.hidden}, d = int64_t{c.head_dim}, f = int64_t{c.ffn};
  const auto q = int64_t{c.q_heads} * d, kv = int64_t{c.kv_heads} * d, v = int64_t{c.vocab};
  auto vector = [&](const std::string& name, int64_t size, std::vector<float>& out) {
    if (!ok) return;
    auto t = tensor(weights, name, {size}, false);
    ok = t.map([&](const ref::FileTensor* found) { out = found->values; });
  };
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, ref::Matrix& out) {
    if (!ok) return;
    auto t = tensor(weights, name, {rows, cols}, false);
    ok = t.map([&](const ref::FileTensor* found) {
      out = ref::Matrix{size_t(rows), size_t(cols), found->values};
    });
  };
  auto int8 = [&](const std::string& name, int64_t rows, int64_t cols, QuantWeight& out) {
    if (!ok) return;
    auto t = tensor(weights, name, {rows, cols}, true);
    ok = t.map([&](const ref::FileTensor* found) {
      out = QuantWeight{size_t(rows), size_t(cols), found->int4,
                        found->group, found->q,     found->scales};
    });
  };
  matrix("tok_embeddings", v, h, prepared->embedding);
  prepared->layers.resize(c.layers);
  for (uint32_t l = 0; l < c.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    PreparedLayer& w = prepared->layers[l];
    vector(p + "attn_norm", h, w.attn_norm);
    vector(p + "attn.q_norm", d, w.q_norm);
    vector(p + "attn.k_norm", d, w.k_norm);
    vector(p + "ffn_norm", h, w.ffn_norm);
    int8(p + "attn.q_proj", q, h, w.q_proj);
    int8(p + "attn.k_proj", kv, h, w.k_proj);
    int8(p + "attn.v_proj", kv, h, w.v_proj);
    int8(p + "attn.o_proj", h, q, w.o_proj);
    auto mlp = [&](const std::string& at, QuantMlp& out) {
      int8(at + "gate_proj", f, h, out.gate_proj);
      int8(at + "up_proj", f, h, out.up_proj);
      int8(at + "down_proj", h, f, out.down_proj);
    };
    if (c.experts == 0) {
      mlp(p + "mlp.", w.mlp);
    } else {
      matrix(p + "mlp.gate", int64_t{c.experts}, h, w.router);
      w.experts.resize(c.experts);
      for (uint32_t e = 0; e < c.experts; ++e) {
        mlp(p + "mlp.experts." + std::to_string(e) + ".", w.experts[e]);
      }
    }
  }
  vector("final_norm", h, prepared->final_norm);
  matrix("lm_head", v, h, prepared->lm_head);
  if (!ok) {
    return tl::unexpected(ok.error());
  }
  Model model;
  model.prepared_ = std::move(prepared);
  return model;
}

const ModelConfig& Model::config() const { return prepared_->config; }

Session::Session(const Model& model) : prepared_(model.prepared_) {
  const ModelConfig& c = prepared_->config;
  kv_.assign(size_t{c.layers} * c.kv_heads, ref::KvHead(c.head_dim, c.context));
}

namespace {

// Per head of `heads`: its norm, then RoPE at `position`.
void norm_and_rotate(std::vector<float>& heads, const std::vector<float>& norm, int32_t position,
                     const ModelConfig& c) {
  for (size_t at = 0; at < heads.size(); at += c.head_dim) {
    const std::span<float> head = std::span(heads).subspan(at, c.head_dim);
    ref::rmsnorm(head, norm, c.rms_eps, head);
    rope(head, position, c.rope_theta);
  }
}

// An int8 V-cache entry as attention reads it back: one head's values quantised like an
// activation row, then float(q) * s.
std::vector<float> s8_rounded(std::span<const float> values) {
  std::vector<int8_t> q;
  const float scale = quantise(values, q);
  std::vector<float> out(values.size());
  for (size_t i = 0; i < q.size(); ++i) out[i] = static_cast<float>(q[i]) * scale;
  return out;
}

// silu(h @ gate_proj^T) * (h @ up_proj^T), which every chip computes its slice of.
std::vector<float> swiglu(std::span<const float> h, const QuantMlp& w) {
  std::vector<float> gate = rows_product(h, w.gate_proj);
  const std::vector<float> up = rows_product(h, w.up_proj);
  for (size_t i = 0; i < gate.size(); ++i) {
    gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  }
  return gate;
}

// MoE (MODEL.md, "Mixture of experts"): the router's logits (MODEL.md's FP32 dot product) from the
// BF16 weights; the route; then on each chip the partial sum over the token's experts in
// ascending expert index of weight x (the expert's partial down_proj output), starting
// from 0; then the all-reduce in chip order into the residual stream.
void moe_into(std::span<const float> h, const PreparedLayer& w, const ModelConfig& c,
              std::span<float> x) {
  std::vector<float> logits(c.experts);
  for (size_t e = 0; e < c.experts; ++e) {
    logits[e] = dot(h, w.router.values.data() + e * c.hidden);
  }
  ref::Route r = ref::route(logits, c.active_experts, c.norm_topk_prob);
  std::vector<size_t> by_index(r.experts.size());
  for (size_t j = 0; j < by_index.size(); ++j) by_index[j] = j;
  std::sort(by_index.begin(), by_index.end(),
            [&](size_t a, size_t b) { return r.experts[a] < r.experts[b]; });
  std::vector<float> acts;
  std::vector<std::vector<float>> partials(c.chips, std::vector<float>(c.hidden, 0.0f));
  std::vector<float> y;
  for (const size_t j : by_index) {
    const QuantWeight& down = w.experts[r.experts[j]].down_proj;
    acts = swiglu(h, w.experts[r.experts[j]]);
    for (uint32_t chip = 0; chip < c.chips; ++chip) {
      const size_t first = chip * down.in / c.chips, end = (chip + 1) * down.in / c.chips;
      chip_product(std::span(acts).subspan(first, end - first), down, first, y);
      for (size_t i = 0; i < c.hidden; ++i) partials[chip][i] += r.weights[j] * y[i];
    }
  }
  all_reduce_into(partials, x);
}

// One layer for n tokens at once, each with the numbers it would get alone: a token's K and
// V are stored before any attention of the layer, and each token attends to its own slot
// and the ones before it only. The matrices then read their weights once per block of
// tokens instead of once per token. x is [n][hidden]; `probes` receives the last token's.
void layer_rows(const PreparedLayer& w, std::vector<float>& x, size_t n,
                std::span<const int32_t> positions, size_t first_slot, ref::KvHead* kv,
                const ModelConfig& c, std::vector<float>* probes) {
  const size_t d = c.head_dim, hidden = c.hidden;
  std::vector<float> h(x.size()), q, k, v;
  for (size_t t = 0; t < n; ++t) {
    ref::rmsnorm(std::span(x).subspan(t * hidden, hidden), w.attn_norm, c.rms_eps,
                 std::span(h).subspan(t * hidden, hidden));
  }
  chip_product_rows(h.data(), n, hidden, w.q_proj, 0, q);
  chip_product_rows(h.data(), n, hidden, w.k_proj, 0, k);
  chip_product_rows(h.data(), n, hidden, w.v_proj, 0, v);
  const size_t q_width = w.q_proj.out, kv_width = w.k_proj.out;
  std::vector<float> attended(n * q_width);
  for (size_t t = 0; t < n; ++t) {
    std::vector<float> qt(q.begin() + static_cast<std::ptrdiff_t>(t * q_width),
                          q.begin() + static_cast<std::ptrdiff_t>((t + 1) * q_width));
    std::vector<float> kt(k.begin() + static_cast<std::ptrdiff_t>(t * kv_width),
                          k.begin() + static_cast<std::ptrdiff_t>((t + 1) * kv_width));
    norm_and_rotate(qt, w.q_norm, positions[t], c);
    norm_and_rotate(kt, w.k_norm, positions[t], c);
    std::copy(qt.begin(), qt.end(), q.begin() + static_cast<std::ptrdiff_t>(t * q_width));
    for (size_t g = 0; g < c.kv_heads; ++g) {
      const std::span<const float> value = std::span(v).subspan(t * kv_width + g * d, d);
      kv[g].store(first_slot + t, bf16_rounded(std::span(kt).subspan(g * d, d)),
                  c.v_cache == calbin::Dtype::kInt8 ? s8_rounded(value) : bf16_rounded(value));
    }
  }
  ref::attend_rows(q, n, c.q_heads, kv, c.kv_heads, first_slot, normalised_softmax, attended);
  columns_product_rows_into(attended, n, w.o_proj, c.chips, x);
  if (probes != nullptr) probes->insert(probes->end(), x.end() - hidden, x.end());
  for (size_t t = 0; t < n; ++t) {
    ref::rmsnorm(std::span(x).subspan(t * hidden, hidden), w.ffn_norm, c.rms_eps,
                 std::span(h).subspan(t * hidden, hidden));
  }
  if (c.experts == 0) {
    std::vector<float> gate, up;
    chip_product_rows(h.data(), n, hidden, w.mlp.gate_proj, 0, gate);
    chip_product_rows(h.data(), n, hidden, w.mlp.up_proj, 0, up);
    for (size_t i = 0; i < gate.size(); ++i) {
      gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    }
    columns_product_rows_into(gate, n, w.mlp.down_proj, c.chips, x);
  } else {
    for (size_t t = 0; t < n; ++t) {
      moe_into(std::span(h).subspan(t * hidden, hidden), w, c,
               std::span(x).subspan(t * hidden, hidden));
    }
  }
  if (probes != nullptr) probes->insert(probes->end(), x.end() - hidden, x.end());
}

}  // namespace

calbin::Result<std::vector<float>> Session::forward(std::span<const int32_t> tokens,
                                                    std::span<const int32_t> positions) {
  const Prepared& p = *prepared_;
  const ModelConfig& c = p.config;
  if (tokens.empty() || tokens.size() != positions.size() ||
      kv_length_ + tokens.size() > c.context) {
    return calbin::fail("contract reference", "tokens",
                        std::to_string(tokens.size()) + " tokens with " +
                            std::to_string(positions.size()) + " positions after " +
                            std::to_string(kv_length_) + " of a context of " +
                            std::to_string(c.context));
  }
  const size_t n = tokens.size();
  std::vector<float> x(n * c.hidden);
  for (size_t t = 0; t < n; ++t) {
    if (tokens[t] < 0 || static_cast<uint32_t>(tokens[t]) >= c.vocab || positions[t] < 0) {
      return calbin::fail("contract reference", "tokens[" + std::to_string(t) + "]",
                          "token " + std::to_string(tokens[t]) + " at position " +
                              std::to_string(positions[t]) + " is out of range");
    }
    const float* row = p.embedding.values.data() + size_t(tokens[t]) * c.hidden;
    std::copy_n(row, c.hidden, x.begin() + static_cast<std::ptrdiff_t>(t * c.hidden));
  }
  // Only the last token's probes are kept, as a device reports them.
  probes_.assign(x.end() - c.hidden, x.end());
  for (size_t l = 0; l < c.layers; ++l) {
    layer_rows(p.layers[l], x, n, positions, kv_length_, &kv_[l * c.kv_heads], c, &probes_);
  }
  kv_length_ += n;
  x.erase(x.begin(), x.end() - c.hidden);
  // The last token's logits: final norm, then each chip's vocabulary rows in FP32, each
  // logit the dot product of MODEL.md's order, written as BF16.
  std::vector<float> normed(c.hidden);
  ref::rmsnorm(x, p.final_norm, c.rms_eps, normed);
  std::vector<float> logits(c.vocab);
  for (size_t v = 0; v < c.vocab; ++v) {
    logits[v] = calbin::round_to_bf16(dot(normed, p.lm_head.values.data() + v * c.hidden));
  }
  return logits;
}

}  // namespace simdev::gen::contract
