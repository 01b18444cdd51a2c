// `calrt bench CALBIN`: timing of a calbin on a device. Fixed prompt and
// generation lengths, several runs, --concurrency requests per run, in sync and/or parallel
// mode; reports TTFT, prefill/decode/end-to-end throughput, TPOT and the per-job phases
// (queueing, H2D, device inference, D2H on the device clock; input preparation, BF16->FP32
// and sampling on the host clock) as P50/P90/P95/P99/min/max/mean/stddev, as a terminal table and
// as JSON/CSV reports, plus an optional Chrome trace of the whole timeline.
//
// Flow: options and host-side inputs (exit 2 when wrong), then the device (bench_session),
// the runs (bench_engine), the figures (bench_metrics), the reports (bench_report) and the
// trace (bench_trace).
#pragma once

#include <string>

#include "runner/bench/bench_options.hpp"

namespace runner {

struct BenchOutcome;  // bench_report.hpp

// Checks what CLI11 cannot: the calbin directory, report paths (their directory exists,
// they are not directories, no two are the same file) and value combinations. Returns an
// empty string, or a message naming the flag and its value (exit 2).
std::string validate(const BenchOptions& options);

// Runs the benchmark; returns the process exit code (exit_codes.hpp). Never throws. With
// `outcome`, the figures are also handed back (a sweep reads them).
int run_bench(const BenchOptions& options, BenchOutcome* outcome = nullptr);

}  // namespace runner
