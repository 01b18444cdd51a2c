// The golden set of a calbin: reference prompts and the outputs an independent FP32 model
// gives for them. Stored as golden/golden.json plus one .npy file per array (FORMAT.md).
//
// For a case with prompt length L and N decode steps (the prompt sits at positions and KV
// slots 0 .. L - 1):
//   tokens          int32 [L]         the prompt
//   prefill_logits  f32   [vocab]     logits at the last prompt position
//   greedy          int32 [N + 1]     greedy[0] = argmax(prefill_logits); decode step s feeds
//                                     greedy[s] at position L + s and greedy[s + 1] is the
//                                     argmax of its logits
//   top_ids         int32 [N, top_k]  per decode step, ids of the top_k logits, descending
//   top_logits      f32   [N, top_k]  their values
//   decode_logits   f32   [N, vocab]  optional: the full rows, for small vocabularies
//   contract_rows   int32 [R]         optional (schema 2): sequence indices (0-based token
//                                     numbers) of the device-contract rows: the last token
//                                     of every prefill chunk, then L + s for decode step s
//   contract_logits f32   [R, vocab]  the device-contract reference's logits at those
//                                     tokens (BF16 values), under teacher forcing
//   contract_probes f32   [R, P, H]   optional (schema 2): the contract reference's residual
//                                     stream of those tokens at the CALRT_EXT_PROBE points
//                                     (P = 2 * layers + 1, H = hidden)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "calbin/result.hpp"

namespace calbin {

struct GoldenCase {
  std::string name;  // e.g. "len17"
  uint32_t prompt_len = 0;
  uint32_t decode_steps = 0;
  bool long_case = false;  // prompt_len >= 4095 or near the context limit
  std::vector<int32_t> tokens;
  std::vector<float> prefill_logits;
  std::vector<int32_t> greedy;
  std::vector<int32_t> top_ids;
  std::vector<float> top_logits;
  std::vector<float> decode_logits;      // empty when not stored
  std::vector<int32_t> contract_rows{};  // empty when the set has no contract reference
  std::vector<float> contract_logits{};
  std::vector<float> contract_probes{};  // [rows][probe_points][probe_width], or empty
  uint32_t probe_points = 0;
  uint32_t probe_width = 0;
};

struct GoldenSet {
  uint32_t vocab = 0;
  uint32_t top_k = 0;
  std::string reference;  // how the golden outputs were computed, e.g. "fp32 unsplit"
  // How the contract rows were computed; empty when no case has them (then schema 1).
  std::string contract_reference{};
  std::vector<GoldenCase> cases;
};

inline constexpr std::string_view kGoldenIndexName = "golden.json";

// Reads <dir>/golden.json and every array it names, checking each shape against the case.
Result<GoldenSet> read_golden(const std::filesystem::path& dir);
// The same for an index of any name (a manifest's golden.index); arrays are relative to its
// directory.
Result<GoldenSet> read_golden_index(const std::filesystem::path& index_path);
// Writes <dir>/golden.json and the arrays; returns the written file names relative to dir.
Result<std::vector<std::string>> write_golden(const std::filesystem::path& dir,
                                              const GoldenSet& set);

}  // namespace calbin
