// The golden set of a functional preset: seeded prompts run through the FP32 reference,
// with the semantics of calbin/golden.hpp (greedy[0] from the prefill logits; decode step s
// feeds greedy[s] at position L + s).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calbin/golden.hpp"
#include "simdev/gen/model_config.hpp"
#include "simdev/gen/reference/contract_model.hpp"
#include "simdev/gen/reference/reference_model.hpp"

namespace simdev::gen {

inline constexpr uint32_t kGoldenDecodeSteps = 8;
inline constexpr uint32_t kGoldenTopK = 20;
inline constexpr const char* kGoldenReference =
    "fp32 reference: dequantised unsplit weights, fp32 activations and KV cache, no activation "
    "quantisation";
inline constexpr const char* kContractReference =
    "device contract (calbin/MODEL.md): per-token int8 activations per chip, int32 "
    "accumulation, bf16 KV cache, fp32 all-reduce in chip order, bf16 logits";

struct CaseSpec {
  std::string name;  // "len17"
  uint32_t prompt_len = 0;
  bool long_case = false;
  // Cases naming the same token stream have prompts that are prefixes of one another, so
  // their prefill is computed once up to each length; the results are bit-identical to
  // separate runs because the reference treats every token of a block independently.
  std::string stream;
};

// Around 1, the 16-token tile and the prefill chunk; with long_cases also 4095..4097 and the
// longest prompt whose decode steps still fit the context.
std::vector<CaseSpec> golden_case_specs(const ModelConfig& config, bool long_cases);
// Prompt tokens of a case: the first prompt_len ids of the stream derived from (seed, stream).
std::vector<int32_t> golden_prompt(const CaseSpec& spec, uint32_t vocab, uint64_t seed);
// Ids of the k largest values, descending, ties to the lower id.
std::vector<int32_t> top_ids(const std::vector<float>& logits, uint32_t k);

calbin::Result<calbin::GoldenCase> run_golden_case(const ref::Model& model, const CaseSpec& spec,
                                                   uint64_t seed);
// Cases of one stream in ascending prompt length, sharing the prefill of common prefixes.
calbin::Result<std::vector<calbin::GoldenCase>> run_golden_chain(const ref::Model& model,
                                                                 std::vector<CaseSpec> chain,
                                                                 uint64_t seed);
// Adds the device-contract rows to cases of one stream (ascending prompt length, as
// run_golden_chain returns them): the last token of every prefill chunk of the config's
// prefill_chunk, then every decode step teacher-forced with the FP32 greedy tokens.
calbin::Result<void> add_contract_rows(const contract::Model& model,
                                       std::vector<calbin::GoldenCase>& chain);
// Runs every case, spread over up to `threads` threads; the result does not depend on it.
// With a contract model every case also gets its contract rows.
calbin::Result<calbin::GoldenSet> compute_golden(const ref::Model& model,
                                                 const contract::Model* contract,
                                                 const std::vector<CaseSpec>& specs, uint64_t seed,
                                                 unsigned threads);

}  // namespace simdev::gen
