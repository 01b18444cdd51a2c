// The per-vector operations of the FP32 reference (calbin/MODEL.md, "One step").
#include <algorithm>
#include <cassert>
#include <cmath>
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

SIMDEV_REFERENCE_WIDE_LOOPS
void attend_loops(std::span<const float> q, const KvHead& kv, size_t slot_count,
                  std::span<float> out) {
  // Scores accumulate dimension by dimension so the inner loop runs over contiguous slots.
  thread_local std::vector<float> scores;
  scores.assign(slot_count, 0.0f);
  for (size_t d = 0; d < kv.head_dim; ++d) {
    const float qd = q[d];
    const float* keys = kv.keys_t.data() + d * kv.capacity;
    for (size_t j = 0; j < slot_count; ++j) {
      scores[j] += qd * keys[j];
    }
  }
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kv.head_dim)));
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
  std::fill(out.begin(), out.end(), 0.0f);
  for (size_t j = 0; j < slot_count; ++j) {
    const float p = scores[j];
    const float* value = kv.values.data() + j * kv.head_dim;
    for (size_t d = 0; d < kv.head_dim; ++d) {
      out[d] += p * value[d];
    }
  }
  const auto inv_sum = static_cast<float>(1.0 / sum);
  for (float& o : out) {
    o *= inv_sum;
  }
}

}  // namespace

void attend(std::span<const float> q, const KvHead& kv, size_t slot_count, std::span<float> out) {
  assert(q.size() == kv.head_dim && out.size() == kv.head_dim);
  assert(slot_count > 0 && slot_count <= kv.capacity);
  attend_loops(q, kv, slot_count, out);
}

}  // namespace simdev::gen::ref
