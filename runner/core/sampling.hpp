// Token sampling (greedy, top-k, top-p with temperature, seeded). The sampler lives in the
// adapter library (llm/host/sampling.hpp) so that `bench` and a service draw the same token
// from the same row; the runner names it as its own.
#pragma once

#include "llm/host/sampling.hpp"

namespace runner {

using calrt::llm::derive_stream;
using calrt::llm::draw_candidate;
using calrt::llm::sample_token;
using calrt::llm::SamplingConfig;
using calrt::llm::SamplingMethod;
using calrt::llm::SplitMix64;
using calrt::llm::to_string;

}  // namespace runner
