#include "simdev/device/model/executor.hpp"

#include <functional>
#include <string>

#include "calbin/bf16.hpp"

#include "simdev/device/model/chiplet.hpp"
#include "simdev/device/model/kernels.hpp"

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
                            std::vector<ChipScratch>& scratch, Workers& workers,
                            const StepRequest& request, std::vector<float>* probes) {
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
    chiplets.emplace_back(dims, chips[c], kv.chip(c), scratch[c], workers, request.mutant);
  }
  const auto each_chip = [&](const std::function<void(Chiplet&, size_t)>& work) {
    workers.run(chiplets.size(), [&](size_t c) { work(chiplets[c], c); });
  };
  const size_t half = dims.head_dim / 2;
  std::vector<float> rope_cos(rows * half), rope_sin(rows * half);
  const double theta =
      request.mutant == NumericsMutant::rope_theta ? dims.rope_theta / 100.0 : dims.rope_theta;
  for (size_t r = 0; r < rows; ++r) {
    kernels::rope_table(request.positions[r], dims.head_dim, theta, &rope_cos[r * half],
                        &rope_sin[r * half]);
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
    const StepRows step{x.data(),        rows,           request.positions.data(), request.past,
                        rope_cos.data(), rope_sin.data()};
    each_chip([&](Chiplet& chip, size_t c) {
      chip.attention(layer, step, first_active, partials[c].data());
    });
    if (first_active > 0) {
      x.erase(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(first_active * hidden));
      live_rows = rows - first_active;
    }
    all_reduce_into(partials, live_rows * hidden, x.data());
    probe();
    each_chip(
        [&](Chiplet& chip, size_t c) { chip.mlp(layer, x.data(), live_rows, partials[c].data()); });
    all_reduce_into(partials, live_rows * hidden, x.data());
    probe();
  }
  const float* last = &x[(live_rows - 1) * hidden];
  std::vector<float> logits(dims.vocab);
  each_chip([&](Chiplet& chip, size_t c) {
    const size_t part =
        request.mutant == NumericsMutant::lm_head_swapped ? chips.size() - 1 - c : c;
    chip.logits(last, &logits[part * dims.vocab_local()]);
  });
  if (request.mutant == NumericsMutant::logits_scale) {
    for (float& v : logits) v *= 1.02f;
  }
  return logits;
}

}  // namespace simdev
