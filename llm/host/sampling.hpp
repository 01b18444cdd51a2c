// Token sampling for `calrt bench` and the adapter (llm/): greedy (argmax), or top-k then
// top-p (nucleus) with temperature, seeded.
//
// Every decision is a pure function of (logits, settings, stream): the stream is derived
// from the sampling seed and the token's coordinates (run, sequence, step) rather than
// drawn from one generator shared by all sequences, so the tokens do not depend on the
// order in which sync and parallel mode happen to interleave sequences. Numeric checks use
// greedy; top-k exists to time a realistic sampler.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>

#include "calbin/splitmix64.hpp"

namespace calrt::llm {

enum class SamplingMethod { greedy, top_k };
const char* to_string(SamplingMethod method);

struct SamplingConfig {
  SamplingMethod method = SamplingMethod::greedy;
  uint32_t top_k = 40;       // candidates kept by top-k (clipped to the vocabulary)
  double temperature = 1.0;  // > 0; divides the logits before the softmax over the top k
  // Of the top k, the smallest best-first prefix whose probability (softmax of logits /
  // temperature) reaches top_p; 1 keeps all k. For top-p alone set top_k to the vocabulary.
  double top_p = 1.0;
  uint64_t seed = 0;
};

// Prompts and sampling draw from SplitMix64, so that one seed reproduces a run anywhere.
using calbin::SplitMix64;

// A stream seed for the coordinates `keys` under `seed`: each key is folded in through
// SplitMix64, so neighbouring coordinates give unrelated streams.
uint64_t derive_stream(uint64_t seed, std::initializer_list<uint64_t> keys);

// The next token: the argmax (lowest id on ties) for greedy; for top-k, one draw from the
// softmax of the k largest logits divided by the temperature, using `stream`. NaN logits
// never win; an empty span gives -1.
int32_t sample_token(std::span<const float> logits, const SamplingConfig& config, uint64_t stream);

// The draw of top-k (and top-p) sampling alone, for a caller that has the candidates already
// (ranked on the device, or by read_row_pick while converting the row): `ranked` are their logits,
// best first; the index of the one drawn from the softmax of ranked / temperature. The same draw as
// sample_token makes over the same candidates; empty gives 0. top_p < 1 first drops the tail beyond
// the nucleus (the best candidate always stays).
size_t draw_candidate(std::span<const float> ranked, double temperature, uint64_t stream,
                      double top_p = 1.0);

}  // namespace calrt::llm
