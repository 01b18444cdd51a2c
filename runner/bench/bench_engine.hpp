// The scheduler of `calrt bench`: drives --concurrency requests per run through chunked
// prefill and token-by-token decode, in sync or parallel mode, and records every job, host
// phase and token (bench_records.hpp).
//
// Sync mode: one job in flight. Prepare, submit, wait, then (when the job produced logits)
// convert and sample, and on to the next job. Requests take turns job by job (round robin).
//
// Parallel mode (Device_SetParallelMode): two slots, ping (0) and pong (1), each with its
// own input/output buffers; up to two jobs in flight, one per slot. The host always waits
// for the oldest job; once it is final, its slot's buffers are free again, and while the
// other slot's job runs the host converts and samples the finished job's logits and
// prepares and submits the next job on the freed slot. A request has at most one job in
// flight, because its KV handle serves one job at a time and each step needs the previous
// one's KV (and, in decode, its token). So with --concurrency 1 there is nothing to put on
// the second slot and parallel mode behaves like sync mode; with 2 or more requests they
// alternate over the slots and host work overlaps device work.
//
// Buffers of a slot are only touched (Kv_Apply, Buffer_Map, Buffer_SetCsr) after that
// slot's job was waited to completion, never while a job owns them.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <vector>

#include "runner/bench/bench_device_trace.hpp"
#include "runner/bench/bench_host_time.hpp"
#include "runner/bench/bench_records.hpp"
#include "runner/bench/bench_session.hpp"
#include "runner/core/report/progress.hpp"

namespace runner {

// A job that failed, timed out or was not accepted; the message says where (mode, run,
// sequence, job) and why.
class BenchFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The prompt of one request: prompt_len token ids drawn uniformly from [0, vocab) by a
// generator seeded from (seed, run, sequence), so every mode sees the same prompts.
std::vector<int32_t> bench_prompt(uint64_t seed, const RunKey& run, uint32_t seq, uint32_t length,
                                  uint32_t vocab);

// XXH3-64 of the bytes of an FP32 logits row: a compact fingerprint for checking that sync
// and parallel mode computed bit-identical logits. It is the bench's own bookkeeping, taken
// on every token of a functional calbin: a byte-wise hash was 58 % of a timing-only run's
// CPU; XXH3 reads the row at memory speed.
uint64_t logits_fingerprint(std::span<const float> logits);

class BenchEngine {
 public:
  BenchEngine(BenchSession& session, HostTime& host, DeviceTraceCollector& trace);

  // Runs --warmup then --runs runs in one mode into `mode`, which keeps what was recorded
  // when a job fails part-way. Throws BenchFailure.
  void run_mode(bool parallel, ModeRecord& mode);
  // Each run (warmup included) done advances this line, when given.
  void set_progress(Progress* progress) { progress_ = progress; }
  // Called after each run (warmup included) with the mode's records so far (--jsonl).
  using RunObserver = std::function<void(const ModeRecord&, const RunKey&)>;
  void set_run_observer(RunObserver observer) { on_run_ = std::move(observer); }

 private:
  struct Slot;
  struct Request;
  struct InFlight;
  struct RunState;

  void run_once(const RunKey& key, std::vector<Slot>& slots, std::vector<calrt::Kv>& kvs,
                ModeRecord& mode);
  void submit_next(RunState& run, size_t request, uint32_t slot, InFlight& flight);
  void complete(RunState& run, InFlight& job);
  void finish_token(RunState& run, Request& request, const ModelIo& io, calrt::Buffer& output,
                    uint64_t submission);
  void finish_ranked_token(RunState& run, Request& q, const ModelIo& io, calrt::Buffer& output,
                           uint64_t submission);
  // A timing-only calbin's device computes no logits (its rows are zeros): fingerprinting
  // them proves nothing and cost most of a timing-only run's CPU.
  bool fingerprints_logits() const { return !s_.manifest.timing_only; }

  BenchSession& s_;
  HostTime& host_;
  DeviceTraceCollector& trace_;
  uint64_t submitted_ = 0;  // jobs submitted on this device so far
  Progress* progress_ = nullptr;
  RunObserver on_run_;
  uint64_t runs_done_ = 0;
};

}  // namespace runner
