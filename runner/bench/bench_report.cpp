#include "runner/bench/bench_report.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "version/version.hpp"

namespace runner {
namespace {

double mean_of(const std::vector<MetricRow>& rows, const char* name) {
  const MetricRow* row = find_metric(rows, name);
  return row != nullptr ? row->dist.mean : 0.0;
}

std::string hex64(uint64_t value) { return fmt::format("{:016x}", value); }

nlohmann::json metric_json(const MetricRow& row) {
  nlohmann::json doc = {{"clock", row.clock}, {"unit", row.unit}, {"count", row.dist.count}};
  if (row.dist.count == 0) {
    doc["unavailable"] = row.unavailable;
    return doc;
  }
  doc.update({{"min", row.dist.min},
              {"p50", row.dist.p50},
              {"p90", row.dist.p90},
              {"p95", row.dist.p95},
              {"p99", row.dist.p99},
              {"max", row.dist.max},
              {"mean", row.dist.mean},
              {"stddev", row.dist.stddev}});
  return doc;
}

// The lower median of a non-empty list.
int64_t median(std::vector<int64_t>& values) {
  std::nth_element(values.begin(), values.begin() + (values.size() - 1) / 2, values.end());
  return values[(values.size() - 1) / 2];
}

nlohmann::json mode_json(const ModeRecord& mode, const std::vector<MetricRow>& rows) {
  nlohmann::json doc;
  doc["slots"] = mode.slots;
  doc["jobs"] = mode.jobs.size();
  for (const MetricRow& row : rows) {
    doc["metrics"][row.name] = metric_json(row);
  }
  doc["runs"] = nlohmann::json::array();
  for (const RunRecord& run : mode.runs) {
    doc["runs"].push_back({{"run", run.run.run},
                           {"warmup", run.run.warmup},
                           {"device_begin_ns", run.begin},
                           {"device_end_ns", run.end},
                           {"e2e_ms", static_cast<double>(run.end - run.begin) / 1e6},
                           {"jobs", run.jobs},
                           {"tokens", run.tokens}});
  }
  // Per measured request: the tokens and a fingerprint of the logits each came from, so
  // that runs and modes can be compared bit for bit.
  doc["requests"] = nlohmann::json::array();
  for (const SequenceRecord& seq : mode.sequences) {
    if (seq.run.warmup) {
      continue;
    }
    nlohmann::json hashes = nlohmann::json::array();
    for (const uint64_t hash : seq.logits_hashes) {
      hashes.push_back(hex64(hash));
    }
    doc["requests"].push_back({{"run", seq.run.run},
                               {"request", seq.seq},
                               {"tokens", seq.tokens},
                               {"logits_xxh3_64", hashes}});
  }
  doc["job_shapes"] = job_shapes_json(mode);
  return doc;
}

// Fixed decimals per unit, so the CSV text is stable: ns resolution for times.
std::string format_value(const std::string& unit, double value) {
  if (unit == "ms") {
    return fmt::format("{:.6f}", value);
  }
  return fmt::format("{:.3f}", value);
}

}  // namespace

nlohmann::json job_shapes_json(const ModeRecord& mode) {
  struct Phases {
    std::vector<int64_t> queue, h2d, infer, d2h;
  };
  std::map<std::tuple<int, uint32_t, uint32_t>, Phases> shapes;
  for (const JobRecord& job : mode.jobs) {
    if (job.run.warmup || !job.has_phases() || job.compute_start == 0) {
      continue;
    }
    Phases& p = shapes[{job.kind == JobKind::prefill ? 0 : 1, job.tokens, job.past}];
    p.queue.push_back(job.start - job.submit);
    p.h2d.push_back(job.h2d_end - job.start);
    p.infer.push_back(job.compute_end - job.compute_start);
    p.d2h.push_back(job.end - job.compute_end);
  }
  nlohmann::json out = nlohmann::json::array();
  for (auto& [key, p] : shapes) {
    out.push_back({{"kind", std::get<0>(key) == 0 ? "prefill" : "decode"},
                   {"tokens", std::get<1>(key)},
                   {"past", std::get<2>(key)},
                   {"count", p.infer.size()},
                   {"queue_ns", median(p.queue)},
                   {"h2d_ns", median(p.h2d)},
                   {"infer_ns", median(p.infer)},
                   {"d2h_ns", median(p.d2h)}});
  }
  return out;
}

BenchComparison compare_modes(const ModeRecord& sync, const std::vector<MetricRow>& sync_metrics,
                              const ModeRecord& parallel,
                              const std::vector<MetricRow>& parallel_metrics) {
  BenchComparison c;
  c.done = true;
  c.sync_e2e_mean_ms = mean_of(sync_metrics, "e2e_time");
  c.parallel_e2e_mean_ms = mean_of(parallel_metrics, "e2e_time");
  c.e2e_speedup = c.parallel_e2e_mean_ms > 0 ? c.sync_e2e_mean_ms / c.parallel_e2e_mean_ms : 0.0;
  std::map<std::pair<uint32_t, uint32_t>, const SequenceRecord*> by_key;
  for (const SequenceRecord& seq : parallel.sequences) {
    if (!seq.run.warmup) {
      by_key[{seq.run.run, seq.seq}] = &seq;
    }
  }
  auto differ = [&](const SequenceRecord& seq, const std::string& what) {
    if (c.first_difference.empty()) {
      c.first_difference = fmt::format("run {} request {}: {}", seq.run.run, seq.seq, what);
    }
  };
  for (const SequenceRecord& seq : sync.sequences) {
    if (seq.run.warmup) {
      continue;
    }
    ++c.requests;
    const auto other = by_key.find({seq.run.run, seq.seq});
    if (other == by_key.end()) {
      c.tokens_identical = c.logits_identical = false;
      differ(seq, "missing in parallel mode");
      continue;
    }
    const SequenceRecord& p = *other->second;
    if (seq.tokens.size() != p.tokens.size()) {
      c.tokens_identical = c.logits_identical = false;
      differ(seq,
             fmt::format("{} tokens (sync) != {} (parallel)", seq.tokens.size(), p.tokens.size()));
    }
    // Both modes ran the same calbin: fingerprints for every token, or none (timing-only).
    const size_t hashed = std::min(seq.logits_hashes.size(), p.logits_hashes.size());
    c.logits_compared = c.logits_compared || hashed > 0;
    for (size_t k = 0; k < std::min(seq.tokens.size(), p.tokens.size()); ++k) {
      if (k < hashed && seq.logits_hashes[k] != p.logits_hashes[k]) {
        c.logits_identical = false;
        differ(seq, fmt::format("token {}: logits fingerprint {} (sync) != {} (parallel)", k,
                                hex64(seq.logits_hashes[k]), hex64(p.logits_hashes[k])));
      }
      if (seq.tokens[k] != p.tokens[k]) {
        c.tokens_identical = false;
        differ(seq,
               fmt::format("token {}: {} (sync) != {} (parallel)", k, seq.tokens[k], p.tokens[k]));
      }
    }
  }
  return c;
}

namespace {

// Each mode the options asked for is counted once: passed when it ran to the end and the
// run's verdict is PASS.
Counts bench_counts(const BenchOutcome& outcome, const BenchOptions& options) {
  Counts counts{.unit = "mode"};
  const uint64_t asked = options.modes == BenchModes::both ? 2 : 1;
  const uint64_t ran = std::min<uint64_t>(outcome.modes.size(), asked);
  if (verdict_from(outcome.result) == Verdict::pass) {
    counts.passed = ran;
  } else {
    counts.failed = asked;
  }
  return counts;
}

}  // namespace

Envelope bench_envelope(const BenchOutcome& outcome, const BenchOptions& options) {
  return {.schema = kBenchSchema,
          .command = "bench",
          .result = verdict_from(outcome.result),
          .counts = bench_counts(outcome, options),
          .error = outcome.error};
}

std::vector<MarkdownTable> bench_markdown_tables(const BenchOutcome& outcome) {
  std::vector<MarkdownTable> tables;
  for (size_t m = 0; m < outcome.modes.size() && m < outcome.metrics.size(); ++m) {
    MarkdownTable& table = tables.emplace_back(MarkdownTable{
        .title = outcome.modes[m].mode + " mode",
        .header = {"metric", "clock", "unit", "count", "p50", "p95", "p99", "mean", "stddev"}});
    for (const MetricRow& row : outcome.metrics[m]) {
      const Distribution& d = row.dist;
      if (d.count == 0) {
        table.rows.push_back(
            {row.name, row.clock, row.unit, "0", "unavailable: " + row.unavailable});
        continue;
      }
      std::vector<std::string> cells = {row.name, row.clock, row.unit, std::to_string(d.count)};
      for (const double value : {d.p50, d.p95, d.p99, d.mean, d.stddev}) {
        cells.push_back(fmt::format("{:.3f}", value));
      }
      table.rows.push_back(std::move(cells));
    }
  }
  return tables;
}

nlohmann::json bench_run_record(const ModeRecord& mode, const RunKey& run) {
  constexpr double kMs = 1e-6;
  nlohmann::json record = {{"record", "run"}, {"mode", mode.mode}, {"run", run.run}};
  for (const RunRecord& r : mode.runs) {
    if (r.run.warmup == run.warmup && r.run.run == run.run) {
      record.update({{"device_ms", static_cast<double>(r.end - r.begin) * kMs},
                     {"jobs", r.jobs},
                     {"tokens", r.tokens}});
    }
  }
  nlohmann::json requests = nlohmann::json::array();
  for (const SequenceRecord& s : mode.sequences) {
    if (s.run.warmup != run.warmup || s.run.run != run.run || s.token_ready.empty()) continue;
    const size_t n = s.token_ready.size();
    nlohmann::json request = {
        {"seq", s.seq},
        {"tokens", n},
        {"ttft_ms", static_cast<double>(s.token_ready.front() - s.first_submit) * kMs},
        {"e2e_ms", static_cast<double>(s.token_ready.back() - s.first_submit) * kMs}};
    request["tpot_ms"] =
        n > 1 ? nlohmann::json(static_cast<double>(s.token_ready.back() - s.token_ready.front()) *
                               kMs / static_cast<double>(n - 1))
              : nlohmann::json(nullptr);
    requests.push_back(std::move(request));
  }
  record["requests"] = std::move(requests);
  return record;
}

nlohmann::json bench_report_json(const BenchOutcome& outcome, const BenchOptions& options) {
  nlohmann::json doc = to_json(bench_envelope(outcome, options));
  doc.update(outcome.environment);
  doc["clocks"] = {
      {"device",
       "the device clock (Job_Status timestamps, Clock_Get): virtual time on the simulator, "
       "where host work counts only as charged through Clock_HostSpend"},
      {"host-wall", "host phases measured with the host's steady clock and charged as measured"},
      {"host-model",
       "host phases modelled as overhead_ns + ceil(bytes / host_gbps) and charged as "
       "modelled; see settings.host_time"}};
  doc["percentiles"] =
      "nearest rank on the sorted samples: P = x[ceil(p / 100 * n)] (1-based), no "
      "interpolation; mean is the arithmetic mean; warmup runs are excluded";
  for (const MetricSpec& spec : bench_metric_specs()) {
    doc["definitions"][spec.name] = {{"clock", spec.device_clock ? "device" : "host"},
                                     {"unit", spec.unit},
                                     {"definition", spec.definition}};
  }
  doc["modes"] = nlohmann::json::object();
  for (size_t m = 0; m < outcome.modes.size() && m < outcome.metrics.size(); ++m) {
    doc["modes"][outcome.modes[m].mode] = mode_json(outcome.modes[m], outcome.metrics[m]);
  }
  if (outcome.comparison.done) {
    const BenchComparison& c = outcome.comparison;
    doc["comparison"] = {{"clock", "device"},
                         {"sync_e2e_mean_ms", c.sync_e2e_mean_ms},
                         {"parallel_e2e_mean_ms", c.parallel_e2e_mean_ms},
                         {"e2e_speedup", c.e2e_speedup},
                         {"requests", c.requests},
                         {"tokens_identical", c.tokens_identical},
                         {"logits_compared", c.logits_compared},
                         {"logits_identical", c.logits_identical}};
    if (!c.first_difference.empty()) {
      doc["comparison"]["first_difference"] = c.first_difference;
    }
  }
  if (!outcome.d2d_spans.is_null()) {
    doc["d2d_spans"] = outcome.d2d_spans;
  }
  if (!outcome.trace.is_null()) {
    doc["trace"] = outcome.trace;
  }
  return doc;
}

std::string bench_report_csv(const BenchOutcome& outcome) {
  std::string csv = csv_provenance_header() +
                    ",mode,metric,clock,unit,count,min,p50,p90,p95,p99,max,mean,stddev\n";
  const std::string provenance = csv_provenance(kBenchSchema);
  for (size_t m = 0; m < outcome.modes.size() && m < outcome.metrics.size(); ++m) {
    for (const MetricRow& row : outcome.metrics[m]) {
      csv += fmt::format("{},{},{},{},{},{}", provenance, outcome.modes[m].mode, row.name,
                         row.clock, row.unit, row.dist.count);
      const Distribution& d = row.dist;
      for (const double value : {d.min, d.p50, d.p90, d.p95, d.p99, d.max, d.mean, d.stddev}) {
        csv += "," + (d.count == 0 ? std::string() : format_value(row.unit, value));
      }
      csv += "\n";
    }
  }
  return csv;
}

void print_bench_table(std::FILE* out, const BenchOutcome& outcome) {
  std::fprintf(out, "%-9s %-16s %-10s %-5s %6s %11s %11s %11s %11s %11s %11s %11s %11s\n", "mode",
               "metric", "clock", "unit", "count", "min", "p50", "p90", "p95", "p99", "max", "mean",
               "stddev");
  for (size_t m = 0; m < outcome.modes.size() && m < outcome.metrics.size(); ++m) {
    for (const MetricRow& row : outcome.metrics[m]) {
      const Distribution& d = row.dist;
      std::string line = fmt::format("{:<9} {:<16} {:<10} {:<5} {:>6}", outcome.modes[m].mode,
                                     row.name, row.clock, row.unit, d.count);
      if (d.count == 0) {
        line += "  unavailable: " + row.unavailable;
      } else {
        for (const double value : {d.min, d.p50, d.p90, d.p95, d.p99, d.max, d.mean, d.stddev}) {
          line += fmt::format(" {:>11.3f}", value);
        }
      }
      std::fprintf(out, "%s\n", line.c_str());
    }
  }
  if (outcome.comparison.done) {
    const BenchComparison& c = outcome.comparison;
    std::fprintf(out,
                 "e2e time per run (device clock, mean): sync %.3f ms, parallel %.3f ms: "
                 "parallel is %.3fx sync\n",
                 c.sync_e2e_mean_ms, c.parallel_e2e_mean_ms, c.e2e_speedup);
    if (c.tokens_identical && c.logits_identical && !c.logits_compared) {
      std::fprintf(out,
                   "tokens: identical in sync and parallel mode (%zu request%s); logits not "
                   "compared: a timing-only calbin's device computes none\n",
                   c.requests, c.requests == 1 ? "" : "s");
    } else if (c.tokens_identical && c.logits_identical) {
      std::fprintf(out,
                   "logits and tokens: bit-identical in sync and parallel mode (%zu request%s)\n",
                   c.requests, c.requests == 1 ? "" : "s");
    } else {
      std::fprintf(out, "logits or tokens DIFFER between sync and parallel mode: %s\n",
                   c.first_difference.c_str());
    }
  }
  std::fflush(out);
}

}  // namespace runner
