// What a caller sends (Request), what it gets back per token (TokenEvent) and once at the end
// (Outcome), with the request's timings and resource ledger.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "llm/error.hpp"
#include "llm/host/sampling.hpp"
#include "llm/ledger.hpp"

namespace calrt::llm {

using RequestId = uint64_t;

// Opt-in context shift: when the sequence reaches n_ctx, keep its first n_keep tokens, drop
// the oldest half of the rest, and prefill what is left again (the graphs are precompiled, so
// the KV cannot be moved in place). Without it, a request that would pass n_ctx is refused.
struct ContextShift {
  uint32_t n_keep = 0;
};

struct Request {
  std::vector<int32_t> prompt;  // token ids, each below the vocabulary
  uint32_t max_new_tokens = 16;
  SamplingConfig sampling;  // greedy by default; the seed makes top-k/top-p repeatable
  // Every TokenEvent carries the row as FP32 (the full row, or a ranked decode's K values),
  // so that a caller can compare a run under load with the same request alone bit for bit.
  bool want_logits = false;
  std::optional<ContextShift> context_shift;
};

// Per request, each phase from its own clock: host phases from std::chrono::steady_clock;
// h2d, infer and d2h from the device's job timestamps (Job_Status; virtual time on the
// simulator), summed over the request's jobs.
struct RequestTiming {
  std::chrono::nanoseconds queue{0};    // host: submit() until the first job was submitted
  std::chrono::nanoseconds h2d{0};      // device: submit_time .. h2d_end_time
  std::chrono::nanoseconds infer{0};    // device: compute_start_time .. compute_end_time
  std::chrono::nanoseconds d2h{0};      // device: compute_end_time .. end_time
  std::chrono::nanoseconds convert{0};  // host: BF16 -> FP32 of logits rows
  std::chrono::nanoseconds sample{0};   // host: ranking and drawing tokens
  std::chrono::nanoseconds ttft{0};     // host: submit() until the first token's event
  std::chrono::nanoseconds tpot{0};     // host: mean between later tokens; 0 with one token
  std::chrono::nanoseconds total{0};    // host: submit() until the outcome
  uint32_t prefill_jobs = 0;
  uint32_t decode_jobs = 0;
};

struct TokenEvent {
  RequestId id = 0;
  int32_t token = -1;
  uint32_t step = 0;  // 0 for the token the prefill gave, then one per decode
  uint32_t row = 0;   // the batch row of the job that gave it (0 on a batch-1 calbin)
  uint32_t slot = 0;  // ping (0) or pong (1) in parallel mode
  // With Request::want_logits: the full row in FP32, or a ranked decode's K values (ids in
  // top_ids), best first.
  std::vector<float> logits;
  std::vector<int32_t> top_ids;
  std::chrono::nanoseconds since_submit{0};  // host steady clock
};

struct Outcome {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // every token generated, also when the request failed
  std::optional<Error> error;   // empty: completed
  RequestTiming timing;
  // The request's own ledger when it ended, after its KV and buffers were released: zero
  // unless the adapter leaked.
  Ledger ledger;
  uint32_t context_shifts = 0;

  bool ok() const { return !error.has_value(); }
};

using Event = std::variant<TokenEvent, Outcome>;

}  // namespace calrt::llm
