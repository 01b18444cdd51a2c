#include "llm/host/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "llm/host/ranking.hpp"

namespace calrt::llm {

const char* to_string(SamplingMethod method) {
  return method == SamplingMethod::top_k ? "top-k" : "greedy";
}

uint64_t derive_stream(uint64_t seed, std::initializer_list<uint64_t> keys) {
  SplitMix64 mix(seed);
  uint64_t stream = mix.next();
  for (const uint64_t key : keys) {
    SplitMix64 step(stream ^ (key * 0xD1B54A32D192ED03ull));
    stream = step.next();
  }
  return stream;
}

int32_t sample_token(std::span<const float> logits, const SamplingConfig& config, uint64_t stream) {
  if (logits.empty()) {
    return -1;
  }
  if (config.method == SamplingMethod::greedy) {
    return argmax(logits);
  }
  const size_t k = std::clamp<size_t>(config.top_k, 1, logits.size());
  const std::vector<int32_t> ids = top_k(logits, k);  // largest first, NaNs last
  if (ids.empty()) {
    return argmax(logits);
  }
  std::vector<float> ranked;
  ranked.reserve(ids.size());
  for (const int32_t id : ids) ranked.push_back(logits[static_cast<size_t>(id)]);
  return ids[draw_candidate(ranked, config.temperature, stream, config.top_p)];
}

size_t draw_candidate(std::span<const float> ranked, double temperature, uint64_t stream,
                      double top_p) {
  if (ranked.empty()) {
    return 0;
  }
  // Softmax over the candidates, shifted by the largest logit so exp() cannot overflow.
  const double top = ranked.front();
  std::vector<double> weights(ranked.size(), 0.0);
  double total = 0.0;
  for (size_t i = 0; i < ranked.size(); ++i) {
    const double logit = ranked[i];
    const double w = std::isnan(logit) ? 0.0 : std::exp((logit - top) / temperature);
    weights[i] = std::isfinite(w) ? w : 0.0;
    total += weights[i];
  }
  if (!(total > 0.0)) {
    return 0;  // every candidate NaN: fall back to the best ranked
  }
  if (top_p < 1.0) {
    // The candidates are best first, so the nucleus is a prefix: keep weights until their
    // share reaches top_p, zero the rest, and draw from what is kept.
    double kept = 0.0;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (kept >= top_p * total) {
        weights[i] = 0.0;
      }
      kept += weights[i];
    }
    total = kept;
  }
  SplitMix64 draw(stream);
  const double target = draw.uniform() * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < ranked.size(); ++i) {
    cumulative += weights[i];
    if (target < cumulative) {
      return i;
    }
  }
  // Rounding left target == total: the last candidate that has any weight.
  for (size_t i = ranked.size(); i-- > 0;) {
    if (weights[i] > 0.0) {
      return i;
    }
  }
  return 0;
}

}  // namespace calrt::llm
