// `calrt generate CALBIN --tokens 1,2,3 --max-new N`: one request through the adapter library
// (llm/), tokens in and tokens out, streamed as JSONL on stdout, one line per token with its
// timing and a last line with the outcome, the request's timings and its ledger.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace runner {

struct GenerateOptions {
  std::filesystem::path calbin;
  std::optional<std::filesystem::path> manifest;  // the service manifest
  std::string tokens;                             // "1,2,3"
  uint32_t max_new = 16;
  std::string sampling = "greedy";  // greedy | top-k
  uint32_t top_k = 40;
  double top_p = 1.0;
  double temperature = 1.0;
  uint64_t seed = 0;
  std::optional<uint32_t> context_shift_keep;
  bool logits = false;  // each token line carries the FP32 row's best 5 ids and values
  bool parallel = true;
  uint32_t timeout_ms = 30000;
  std::string device = "sim";
  std::string device_kind = "sim";
  uint32_t device_index = 0;
  std::string device_config;
};

// Returns the process exit code (exit_codes.hpp): 0 the request completed, 1 it or the
// device failed (or the calbin failed its contract check), 2 bad input. Never throws.
int run_generate(const GenerateOptions& options);

}  // namespace runner
