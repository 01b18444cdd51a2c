#include "simdev/device/model/executor.hpp"

#include <string>

#include "calbin/bf16.hpp"

#include "simdev/device/model/chiplet.hpp"

namespace simdev {
namespace {

// The D2D all-reduce: partial sums are added in FP32 in chip order (deterministic), then
// added to the residual stream.
void all_reduce_into(std::vector<std::vector<float>>& partials, size_t count, float* x) {
  for (size_t i = 0; i < count; ++i) {
    float sum = 0.0f;
    for (const auto& partial : partials) {
      sum += partial[i];
    }
    x[i] += sum;
  }
}

}  // namespace

Status validate_tokens(std::span<const int32_t> tokens, size_t vocab) {
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] < 0 || static_cast<size_t>(tokens[t]) >= vocab) {
      return fail(CALRT_INVALID_ARGUMENT,
                  "token input [" + std::to_string(t) + "] = " + std::to_string(tokens[t]) +
                      " is outside vocab [0, " + std::to_string(vocab) + ")");
    }
  }
  return {};
}

std::vector<float> run_step(const ModelDims& dims, std::span<const ChipWeights> chips, KvStore& kv,
                            std::vector<ChipScratch>& scratch, const StepRequest& request,
                            std::vector<float>* probes) {
  const size_t rows = request.tokens.size();
  const size_t hidden = dims.hidden;
  std::vector<float> x(rows * hidden);
  for (size_t r = 0; r < rows; ++r) {
    const uint16_t* row = &chips[0].embedding[static_cast<size_t>(request.tokens[r]) * hidden];
    for (size_t i = 0; i < hidden; ++i) x[r * hidden + i] = calbin::bf16_to_f32(row[i]);
  }
  scratch.resize(chips.size());
  std::vector<Chiplet> chiplets;
  chiplets.reserve(chips.size());
  for (size_t c = 0; c < chips.size(); ++c) {
    chiplets.emplace_back(dims, chips[c], kv.chip(c), scratch[c], request.mutant);
  }
  std::vector<std::vector<float>> partials(chips.size(), std::vector<float>(rows * hidden));
  size_t live_rows = rows;  // rows whose residual stream is still needed
  auto probe = [&] {
    if (probes != nullptr) {
      const float* last_row = &x[(live_rows - 1) * hidden];
      probes->insert(probes->end(), last_row, last_row + hidden);
    }
  };
  if (probes != nullptr) probes->clear();
  probe();
  for (size_t layer = 0; layer < dims.layers; ++layer) {
    // Only the last token's logits are returned, so after the last layer's KV is stored
    // the other rows need no attention or MLP.
    const size_t first_active = layer + 1 == dims.layers ? rows - 1 : 0;
    const StepRows step{x.data(), rows, request.positions.data(), request.past};
    for (size_t c = 0; c < chiplets.size(); ++c) {
      chiplets[c].attention(layer, step, first_active, partials[c].data());
    }
    if (first_active > 0) {
      x.erase(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(first_active * hidden));
      live_rows = rows - first_active;
    }
    all_reduce_into(partials, live_rows * hidden, x.data());
    probe();
    for (size_t c = 0; c < chiplets.size(); ++c) {
      chiplets[c].mlp(layer, x.data(), live_rows, partials[c].data());
    }
    all_reduce_into(partials, live_rows * hidden, x.data());
    probe();
  }
  const float* last = &x[(live_rows - 1) * hidden];
  std::vector<float> logits(dims.vocab);
  for (size_t c = 0; c < chiplets.size(); ++c) {
    const size_t half =
        request.mutant == NumericsMutant::lm_head_swapped ? chips.size() - 1 - c : c;
    chiplets[c].logits(last, &logits[half * dims.vocab_local()]);
  }
  if (request.mutant == NumericsMutant::logits_scale) {
    for (float& v : logits) v *= 1.02f;
  }
  return logits;
}

}  // namespace simdev
