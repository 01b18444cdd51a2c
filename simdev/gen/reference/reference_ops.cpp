// The per-vector operations of the FP32 reference (calbin/MODEL.md, "One step").
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "simdev/gen/reference/reference_model.hpp"
#include "simdev/gen/reference/wide_loops.hpp"

namespace simdev::gen::ref {

void rmsnorm(std::span<const float> x, std::span<const float> weight, double eps,
             std::span<float> out) {
  assert(x.size() == weight.size());
  assert(out.size() == x.size());
  // The mean of squares is accumulated in double so the reference is the more exact side.
  double sum_squares = 0.0;
  for (const float value : x) {
    sum_squares += static_cast<double>(value) * value;
  }
  const double mean = sum_squares / static_cast<double>(x.size());
  const auto inv_rms = static_cast<float>(1.0 / std::sqrt(mean + eps));
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = x[i] * inv_rms * weight[i];
  }
}

Route route(std::span<const float> logits, uint32_t k, bool normalise) {
  std::vector<uint32_t> order(logits.size());
  for (uint32_t e = 0; e < order.size(); ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return logits[a] > logits[b]; });
  order.resize(std::min<size_t>(k, order.size()));
  // Softmax in double over every expert, then the picked experts' share.
  const double top = logits[order.front()];
  double all = 0.0;
  for (const float z : logits) all += std::exp(static_cast<double>(z) - top);
  double picked = 0.0;
  std::vector<double> p;
  for (const uint32_t e : order) {
    p.push_back(std::exp(static_cast<double>(logits[e]) - top) / all);
    picked += p.back();
  }
  Route r{order, {}};
  for (const double share : p)
    r.weights.push_back(static_cast<float>(normalise ? share / picked : share));
  return r;
}

void rope(std::span<float> head, int64_t position, double theta) {
  assert(head.size() % 2 == 0);
  const size_t half = head.size() / 2;
  const auto dim = static_cast<double>(head.size());
  for (size_t i = 0; i < half; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / dim);
    const double angle = static_cast<double>(position) * inv_freq;
    const double cos_a = std::cos(angle);
    const double sin_a = std::sin(angle);
    const double a = head[i];
    const double b = head[i + half];
    head[i] = static_cast<float>(a * cos_a - b * sin_a);
    head[i + half] = static_cast<float>(a * sin_a + b * cos_a);
  }
}

KvHead::KvHead(size_t head_dim_in, size_t capacity_in)
    : head_dim(head_dim_in),
      capacity(capacity_in),
      keys_t(head_dim_in * capacity_in, 0.0f),
      values(head_dim_in * capacity_in, 0.0f) {}

void KvHead::store(size_t slot, std::span<const float> key, std::span<const float> value) {
  assert(slot < capacity);
  assert(key.size() == head_dim && value.size() == head_dim);
  for (size_t d = 0; d < head_dim; ++d) {
    keys_t[d * capacity + slot] = key[d];
  }
  std::copy(value.begin(), value.end(),
            values.begin() + static_cast<std::ptrdiff_t>(slot * head_dim));
}

namespace {

// A block of queries that read the same KV head: each key and value is loaded once for all of
// them. 16 floats in one vector value: lane-wise IEEE products and sums, each lane one slot (or
// one dimension), so the per-lane order is the scalar loop's.
constexpr size_t kBlock = 4;
constexpr size_t kLanes = 16;
using Lanes = float __attribute__((vector_size(64)));

// scores[i][j] = sum over d of q[i][d] * keys_t[d * stride + j], for slots j < slots.
SIMDEV_REFERENCE_WIDE_LOOPS
void dot_slots(const float* const* q, const float* keys_t, size_t stride, size_t head_dim,
               size_t slots, float* const* scores) {
  size_t j = 0;
  for (; j + 4 * kLanes <= slots; j += 4 * kLanes) {
    Lanes acc[kBlock][4] = {};
    for (size_t d = 0; d < head_dim; ++d) {
      Lanes k[4];
      std::memcpy(k, keys_t + d * stride + j, sizeof k);
      for (size_t i = 0; i < kBlock; ++i) {
        const Lanes qd = q[i][d] - Lanes{};  // x - 0 is x, -0 included
        for (size_t u = 0; u < 4; ++u) acc[i][u] += qd * k[u];
      }
    }
    for (size_t i = 0; i < kBlock; ++i) std::memcpy(scores[i] + j, acc[i], sizeof acc[i]);
  }
  for (; j + kLanes <= slots; j += kLanes) {
    Lanes acc[kBlock] = {};
    for (size_t d = 0; d < head_dim; ++d) {
      Lanes k;
      std::memcpy(&k, keys_t + d * stride + j, sizeof k);
      for (size_t i = 0; i < kBlock; ++i) acc[i] += (q[i][d] - Lanes{}) * k;
    }
    for (size_t i = 0; i < kBlock; ++i) std::memcpy(scores[i] + j, &acc[i], sizeof acc[i]);
  }
  for (; j < slots; ++j) {
    for (size_t i = 0; i < kBlock; ++i) {
      float s = 0.0f;
      for (size_t d = 0; d < head_dim; ++d) s += q[i][d] * keys_t[d * stride + j];
      scores[i][j] = s;
    }
  }
}

// out[i][e] = sum over slots j < slots of p[i][j] * values[j * head_dim + e], in order of j.
SIMDEV_REFERENCE_WIDE_LOOPS
void weigh_values(const float* const* p, const float* values, size_t head_dim, size_t slots,
                  float* const* out) {
  size_t e = 0;
  for (; e + 4 * kLanes <= head_dim; e += 4 * kLanes) {
    Lanes acc[kBlock][4] = {};
    for (size_t j = 0; j < slots; ++j) {
      Lanes v[4];
      std::memcpy(v, values + j * head_dim + e, sizeof v);
      for (size_t i = 0; i < kBlock; ++i) {
        const Lanes pj = p[i][j] - Lanes{};
        for (size_t u = 0; u < 4; ++u) acc[i][u] += pj * v[u];
      }
    }
    for (size_t i = 0; i < kBlock; ++i) std::memcpy(out[i] + e, acc[i], sizeof acc[i]);
  }
  for (; e + kLanes <= head_dim; e += kLanes) {
    Lanes acc[kBlock] = {};
    for (size_t j = 0; j < slots; ++j) {
      Lanes v;
      std::memcpy(&v, values + j * head_dim + e, sizeof v);
      for (size_t i = 0; i < kBlock; ++i) acc[i] += (p[i][j] - Lanes{}) * v;
    }
    for (size_t i = 0; i < kBlock; ++i) std::memcpy(out[i] + e, &acc[i], sizeof acc[i]);
  }
  for (; e < head_dim; ++e) {
    for (size_t i = 0; i < kBlock; ++i) {
      float acc = 0.0f;
      for (size_t j = 0; j < slots; ++j) acc += p[i][j] * values[j * head_dim + e];
      out[i][e] = acc;
    }
  }
}

}  // namespace

float softmax_after_sum(std::span<float> scores, size_t head_dim) {
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  float max_score = -std::numeric_limits<float>::infinity();
  for (float& s : scores) {
    s *= scale;
    max_score = std::max(max_score, s);
  }
  double sum = 0.0;
  for (float& s : scores) {
    s = std::exp(s - max_score);
    sum += s;
  }
  return static_cast<float>(1.0 / sum);
}

void attend_rows(std::span<const float> q, size_t count, size_t q_heads, const KvHead* kv,
                 size_t kv_heads, size_t first_slot, SoftmaxRule softmax, std::span<float> out) {
  assert(kv_heads > 0 && q_heads % kv_heads == 0);
  const size_t group = q_heads / kv_heads, d = kv[0].head_dim;
  assert(q.size() == count * q_heads * d && out.size() == q.size());
  assert(first_slot + count <= kv[0].capacity);
  // Queries are numbered per KV head, token-major: query r of KV head g is token r / group,
  // head g * group + r % group. Blocks of kBlock never straddle two KV heads.
  const size_t per_head = count * group, blocks_per_head = (per_head + kBlock - 1) / kBlock;
  split_two(kv_heads * blocks_per_head, [&](size_t first, size_t blocks) {
    std::vector<float> weights(kBlock * (first_slot + count));
    std::vector<float> sums(kBlock * d);
    for (size_t b = first; b < first + blocks; ++b) {
      const size_t g = b / blocks_per_head, r0 = (b % blocks_per_head) * kBlock;
      const size_t real = std::min(kBlock, per_head - r0);
      // A short last block repeats its last query; the repeat's results are dropped.
      const float* rows[kBlock];
      float* weight_rows[kBlock];
      float* sum_rows[kBlock];
      size_t slots[kBlock];
      for (size_t i = 0; i < kBlock; ++i) {
        const size_t r = r0 + std::min(i, real - 1);
        const size_t t = r / group, head = g * group + r % group;
        rows[i] = q.data() + (t * q_heads + head) * d;
        slots[i] = first_slot + t + 1;
        weight_rows[i] = weights.data() + i * (first_slot + count);
        sum_rows[i] = sums.data() + i * d;
      }
      const size_t most = *std::max_element(slots, slots + kBlock);
      dot_slots(rows, kv[g].keys_t.data(), kv[g].capacity, d, most, weight_rows);
      float factor[kBlock];
      for (size_t i = 0; i < kBlock; ++i) {
        factor[i] = softmax(std::span(weight_rows[i], slots[i]), d);
        // Slots past a query's own weigh 0: acc + (+-0) is acc exactly, as acc starts at +0
        // and a round-to-nearest sum is -0 only when both its terms are.
        std::fill(weight_rows[i] + slots[i], weight_rows[i] + most, 0.0f);
      }
      weigh_values(weight_rows, kv[g].values.data(), d, most, sum_rows);
      for (size_t i = 0; i < real; ++i) {
        const size_t r = r0 + i, t = r / group, head = g * group + r % group;
        float* o = out.data() + (t * q_heads + head) * d;
        for (size_t e = 0; e < d; ++e) o[e] = sum_rows[i][e] * factor[i];
      }
    }
  });
}

}  // namespace simdev::gen::ref
