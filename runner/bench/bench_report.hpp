// The outputs of `calrt bench`: the terminal table, the JSON report (schema
// "calrt-bench/3") and the CSV report (one row per metric per mode). Both reports carry
// what is needed to reproduce the run (calbin hash, device config, versions, seeds, the
// exact command line) and nothing that changes from one identical run to the next (no
// wall-clock timestamps, no host names, no temporary paths), so that with
// --host-time model two runs give byte-identical files.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/bench/bench_metrics.hpp"
#include "runner/bench/bench_options.hpp"
#include "runner/bench/bench_records.hpp"
#include "runner/core/report/envelope.hpp"
#include "runner/core/report/markdown.hpp"

namespace runner {

inline constexpr const char* kBenchSchema = "calrt-bench/3";

// Sync against parallel mode, when both ran.
struct BenchComparison {
  bool done = false;
  double sync_e2e_mean_ms = 0.0;
  double parallel_e2e_mean_ms = 0.0;
  double e2e_speedup = 0.0;  // sync / parallel mean e2e_time, device clock
  size_t requests = 0;       // measured requests compared
  bool tokens_identical = true;
  bool logits_compared = false;  // false for a timing-only calbin: no logits were computed
  bool logits_identical = true;
  std::string first_difference;  // where they first differ; empty when identical
};
// Per (kind, tokens, past) of the measured jobs: how many, and the median of each device
// phase (`job_shapes` in the reports). What `calrt calibrate` fits the timing model to; the
// metrics mix shapes.
nlohmann::json job_shapes_json(const ModeRecord& mode);

BenchComparison compare_modes(const ModeRecord& sync, const std::vector<MetricRow>& sync_metrics,
                              const ModeRecord& parallel,
                              const std::vector<MetricRow>& parallel_metrics);

struct BenchOutcome {
  std::string result = "PASS";  // PASS, FAIL (a device step or the comparison), ERROR (usage)
  std::string error;
  // Built by bench.cpp: "calbin", "device", "settings" sections.
  nlohmann::json environment = nlohmann::json::object();
  std::vector<ModeRecord> modes;
  std::vector<std::vector<MetricRow>> metrics;  // per mode, same order
  BenchComparison comparison;
  nlohmann::json trace;      // summary of --trace, or null
  nlohmann::json d2d_spans;  // the device trace's D2D reductions by size, or null
};

// The envelope of the report (also the --jsonl summary line).
Envelope bench_envelope(const BenchOutcome& outcome, const BenchOptions& options);
nlohmann::json bench_report_json(const BenchOutcome& outcome, const BenchOptions& options);
// --md: the metrics of each mode as one table.
std::vector<MarkdownTable> bench_markdown_tables(const BenchOutcome& outcome);
// --jsonl: one measured run of a mode, from its records: the run's device time and each
// request's TTFT, TPOT and e2e time (device clock).
nlohmann::json bench_run_record(const ModeRecord& mode, const RunKey& run);
std::string bench_report_csv(const BenchOutcome& outcome);
void print_bench_table(std::FILE* out, const BenchOutcome& outcome);

}  // namespace runner
