// What one mode of `calrt bench` recorded: every job with its device-clock timestamps,
// every host phase placed on the device clock, and every generated token. Metrics, reports
// and the trace are computed from these records only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace runner {

enum class JobKind { prefill, decode };
inline const char* to_string(JobKind kind) {
  return kind == JobKind::prefill ? "prefill" : "decode";
}

// Where a job or span belongs: mode, run (warmup runs are numbered apart), sequence.
struct RunKey {
  bool warmup = false;
  uint32_t run = 0;
  // "run 2" or "warmup 0".
  std::string label() const { return (warmup ? "warmup " : "run ") + std::to_string(run); }
};

struct JobRecord {
  // The bench's own count of submissions on this device, from 1. The device's job serial
  // (its trace, its messages) is resolved from the trace, see bench_trace.cpp.
  uint64_t submission = 0;
  RunKey run;
  uint32_t seq = 0;
  JobKind kind = JobKind::prefill;
  uint32_t index = 0;   // prefill chunk or decode step, from 0
  uint32_t tokens = 0;  // cur_seq_len
  uint32_t past = 0;    // past_kv_cur_seq_len
  uint32_t slot = 0;
  // Job_Status on the device clock, ns. h2d_end/compute_end are 0 when the runtime cannot
  // tell (real hardware may not): those phases are then unavailable, not zero.
  int64_t submit = 0;
  int64_t start = 0;
  int64_t h2d_end = 0;
  int64_t compute_start = 0;  // 0 when unknown: infer then also holds the wait for the chips
  int64_t compute_end = 0;
  int64_t end = 0;
  // The host blocked in Job_Wait for this job, device clock.
  int64_t wait_begin = 0;
  int64_t wait_end = 0;
  int64_t prepare_ns = 0;  // host time of preparing its inputs, as charged
  bool has_phases() const { return h2d_end > 0 && compute_end > 0; }
};

// One host phase on the device clock (the host track of the trace).
struct HostSpanRecord {
  const char* name = "";  // "prepare", "rank" (greedy), "bf16->fp32", "sample", "wait"
  int64_t begin = 0;
  int64_t end = 0;
  uint64_t submission = 0;  // the job it served (JobRecord::submission)
  RunKey run;
  uint32_t seq = 0;
};

struct SequenceRecord {
  RunKey run;
  uint32_t seq = 0;
  int64_t first_submit = 0;     // Job_Status submit time of its first prefill chunk
  int64_t prefill_end = 0;      // end time of its last prefill chunk
  std::vector<int32_t> tokens;  // generated, in order (tokens[0] from prefill)
  // XXH3-64 of the logits each token came from: greedy the stored BF16 row, top-k the FP32 row.
  // Empty for a timing-only calbin, whose device computes no logits.
  std::vector<uint64_t> logits_hashes;
  std::vector<int64_t> token_ready;  // device time the host finished sampling each token
  std::vector<int64_t> convert_ns;   // top-k: BF16->FP32 of each token's logits, as charged
  std::vector<int64_t> sample_ns;    // sampling (greedy: ranking) of each token, as charged
  std::vector<int64_t> step_ns;      // each token's whole host step, from the mapped output
                                     // to the token (convert and sample for top-k), as charged
};

struct RunRecord {
  RunKey run;
  int64_t begin = 0;  // device time when the host began preparing the run's first job
  int64_t end = 0;    // device time when the host had the run's last token
  uint64_t jobs = 0;
  uint64_t tokens = 0;  // generated
};

struct ModeRecord {
  std::string mode;  // "sync" or "parallel"
  uint32_t slots = 1;
  std::vector<JobRecord> jobs;
  std::vector<HostSpanRecord> host;
  std::vector<SequenceRecord> sequences;
  std::vector<RunRecord> runs;
};

}  // namespace runner
