#include "runner/bench/bench_sweep.hpp"

#include <spdlog/fmt/fmt.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "calbin/manifest.hpp"
#include "runner/bench/bench.hpp"
#include "runner/bench/bench_metrics.hpp"
#include "runner/bench/bench_report.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/core/report/jsonl.hpp"
#include "runner/core/report/markdown.hpp"
#include "runner/core/report/output_file.hpp"
#include "runner/core/report/progress.hpp"
#include "runner/core/report/report.hpp"

namespace runner {
namespace {

// A sweep is for exploring, not for exhausting a machine: 64 points of a 3-run bench on the
// reference model take minutes already.
constexpr size_t kMaxPoints = 64;
constexpr const char* kSweepSchema = "calrt-bench-sweep/4";

struct Point {
  size_t index = 0;                 // in the whole sweep (a shard runs some)
  std::vector<std::string> values;  // one per axis
  std::string result;               // PASS, FAIL or ERROR
  std::string error;
  std::string mode;  // the mode whose figures are shown: parallel when both ran
  std::vector<MetricRow> metrics;
  // What `calrt calibrate` reads of the point (the JSON report only, not the --jsonl lines):
  // the calbin's identity, the device config, the sync mode's job shapes and the D2D spans.
  nlohmann::json measured;
};

// The figures a sweep shows, in column order: (metric, statistic).
struct Column {
  const char* metric;
  const char* statistic;  // "p50", "p99" or "mean"
  const char* header;
};
constexpr Column kColumns[] = {
    {"ttft", "p50", "ttft_p50_ms"},
    {"ttft", "p99", "ttft_p99_ms"},
    {"tpot", "p50", "tpot_p50_ms"},
    {"tpot", "p99", "tpot_p99_ms"},
    {"e2e_time", "mean", "e2e_time_mean_ms"},
    {"prefill_tok_s", "mean", "prefill_tok_s"},
    {"decode_tok_s", "mean", "decode_tok_s"},
    {"e2e_tok_s", "mean", "e2e_tok_s"},
    // What a decode that ranks on the device saves (`--sweep calbin=FULL,RANKED`): the output
    // DMA and the host's step from the mapped output to the next token.
    {"d2h_decode", "p50", "d2h_decode_p50_us"},
    {"host_step", "p50", "host_step_p50_us"},
};

std::optional<double> figure(const Point& p, const Column& c) {
  const MetricRow* row = find_metric(p.metrics, c.metric);
  if (row == nullptr || row->dist.count == 0) return std::nullopt;
  const std::string_view s = c.statistic;
  return s == "p50" ? row->dist.p50 : s == "p99" ? row->dist.p99 : row->dist.mean;
}

std::vector<Point> points_of(const std::vector<BenchOptions::SweepAxis>& axes) {
  std::vector<Point> points(1);
  for (const auto& axis : axes) {
    std::vector<Point> next;
    for (const Point& p : points) {
      for (const std::string& value : axis.values) {
        Point q = p;
        q.values.push_back(value);
        next.push_back(std::move(q));
      }
    }
    points = std::move(next);
  }
  return points;
}

// The calbin itself is a sweep key: the same bench over several packagings of one model.
constexpr const char* kCalbinKey = "calbin";

// The bench's own options a sweep may vary, and where each goes.
uint32_t* bench_field(BenchOptions& o, const std::string& key) {
  if (key == "prompt_len") return &o.prompt_len;
  if (key == "gen_len") return &o.gen_len;
  if (key == "concurrency") return &o.concurrency;
  return nullptr;
}

// A swept calbin's manifest, read before any point runs: a bad one found at its own point
// would stop the sweep there, with the points before it run and no report written.
std::string check_swept_calbin(const BenchOptions& o, const std::string& dir) {
  auto manifest = calbin::read_manifest(dir);
  if (!manifest) return manifest.error().to_string();
  const bool sampled = o.sampling.method == SamplingMethod::top_k;
  for (const calbin::Model& model : manifest->models) {
    for (const calbin::TensorDesc& t : model.outputs) {
      const int64_t k = t.shape.size() == 2 ? t.shape[1] : 0;
      if (sampled && t.role == calbin::TensorRole::kTopIds && k < int64_t{o.sampling.top_k}) {
        return fmt::format(
            "{}: --top-k {}: decode model {} ranks on the device and gives its "
            "best {} ids only",
            dir, o.sampling.top_k, model.name, k);
      }
    }
  }
  return {};
}

std::string validate_sweep(const BenchOptions& o) {
  if (o.sweep.size() > 2) {
    return fmt::format("--sweep given {} times: one or two keys", o.sweep.size());
  }
  if (o.sweep.size() == 2 && o.sweep[0].key == o.sweep[1].key) {
    return fmt::format("--sweep {}: the same key twice", o.sweep[0].key);
  }
  if (!o.trace.empty()) {
    return "--trace with --sweep: trace one point with its own bench run";
  }
  size_t count = 1;
  for (const auto& axis : o.sweep) {
    BenchOptions probe;  // which keys are the bench's own, asked without touching `o`
    if (axis.key == kCalbinKey) {
      for (const std::string& value : axis.values) {
        if (std::string problem = check_swept_calbin(o, value); !problem.empty()) {
          return fmt::format("--sweep calbin: {}", problem);
        }
      }
      count *= axis.values.size();
      continue;
    }
    if (bench_field(probe, axis.key) != nullptr) {
      for (const std::string& value : axis.values) {
        if (value.find_first_not_of("0123456789") != std::string::npos || value.size() > 9 ||
            std::stoul(value) == 0) {
          return fmt::format("--sweep {}: value '{}' is not a count of at least 1", axis.key,
                             value);
        }
      }
      count *= axis.values.size();
      continue;
    }
    // The base config must not set what the sweep varies: which would win is not obvious.
    for (size_t at = 0; (at = o.device_config.find(axis.key + "=", at)) != std::string::npos;
         ++at) {
      if (at == 0 || o.device_config[at - 1] == ';') {
        return fmt::format("--sweep {}: --device-config '{}' sets it too", axis.key,
                           o.device_config);
      }
    }
    count *= axis.values.size();
  }
  if (count > kMaxPoints) {
    return fmt::format("--sweep: {} points, more than {}", count, kMaxPoints);
  }
  return {};
}

std::string cell(const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : ""; }

std::string sweep_csv(const BenchOptions& o, const std::vector<Point>& points) {
  std::string out = csv_provenance_header() + ",";
  for (const auto& axis : o.sweep) out += axis.key + ",";
  out += "result,mode";
  for (const Column& c : kColumns) out += std::string(",") + c.header;
  out += ",error\n";
  for (const Point& p : points) {
    out += csv_provenance(kSweepSchema) + ",";
    for (const std::string& v : p.values) out += csv_quote(v) + ",";
    out += p.result + "," + p.mode;
    for (const Column& c : kColumns) out += "," + cell(figure(p, c));
    out += "," + csv_quote(p.error) + "\n";
  }
  return out;
}

nlohmann::json shard_json(const BenchOptions& o) {
  return o.shard ? nlohmann::json{{"shard", to_json(*o.shard)}} : nlohmann::json::object();
}

// One point's entry of the report, also its --jsonl record.
nlohmann::json point_json(const BenchOptions& o, const Point& p) {
  nlohmann::json entry = {{"index", p.index}, {"result", p.result}, {"mode", p.mode}};
  for (size_t a = 0; a < o.sweep.size(); ++a) entry["config"][o.sweep[a].key] = p.values[a];
  for (const Column& c : kColumns) {
    const auto v = figure(p, c);
    entry[c.header] = v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  }
  if (!p.error.empty()) entry["error"] = p.error;
  return entry;
}

nlohmann::json measured_json(const BenchOptions& point, const BenchOutcome& outcome) {
  nlohmann::json out = {{"device_config", point.device_config}};
  if (const auto calbin = outcome.environment.find("calbin"); calbin != outcome.environment.end()) {
    for (const char* key : {"manifest_sha256", "prefill_model", "decode_model"}) {
      if (calbin->contains(key)) out["calbin"][key] = calbin->at(key);
    }
  }
  for (const ModeRecord& mode : outcome.modes) {
    if (mode.mode == "sync") out["job_shapes"] = job_shapes_json(mode);
  }
  if (!outcome.d2d_spans.is_null()) out["d2d_spans"] = outcome.d2d_spans;
  return out;
}

// Points not run (a sweep stopped by bad input) count as skipped.
Envelope sweep_envelope(const std::vector<Point>& points, const std::string& result,
                        const std::string& error = {}) {
  Counts counts{.unit = "point"};
  for (const Point& p : points) {
    (p.result.empty() ? counts.skipped : p.result == "PASS" ? counts.passed : counts.failed) += 1;
  }
  return {.schema = kSweepSchema,
          .command = "bench",
          .result = verdict_from(result),
          .counts = counts,
          .error = error};
}

nlohmann::json sweep_json(const BenchOptions& o, const std::vector<Point>& points,
                          const std::string& result) {
  nlohmann::json doc = to_json(sweep_envelope(points, result));
  doc.update({{"calbin", o.calbin.string()},
              {"device_config", o.device_config},
              {"prompt_len", o.prompt_len},
              {"gen_len", o.gen_len},
              {"runs", o.runs},
              {"concurrency", o.concurrency}});
  doc["axes"] = nlohmann::json::array();
  for (const auto& axis : o.sweep)
    doc["axes"].push_back({{"key", axis.key}, {"values", axis.values}});
  doc["points"] = nlohmann::json::array();
  for (const Point& p : points) {
    nlohmann::json entry = point_json(o, p);
    if (!p.measured.is_null()) entry["measured"] = p.measured;
    doc["points"].push_back(std::move(entry));
  }
  return doc;
}

MarkdownTable sweep_markdown(const BenchOptions& o, const std::vector<Point>& points) {
  MarkdownTable table{.title = "Sweep points"};
  for (const auto& axis : o.sweep) table.header.push_back(axis.key);
  table.header.insert(table.header.end(), {"result", "mode"});
  for (const Column& c : kColumns) table.header.emplace_back(c.header);
  for (const Point& p : points) {
    std::vector<std::string> row = p.values;
    row.insert(row.end(), {p.result, p.mode});
    for (const Column& c : kColumns) row.push_back(cell(figure(p, c)));
    table.rows.push_back(std::move(row));
  }
  return table;
}

void print_row(const BenchOptions& o, const Point& p) {
  std::string line;
  for (size_t a = 0; a < o.sweep.size(); ++a) {
    line += fmt::format("{:>{}}  ", p.values[a], std::max<size_t>(o.sweep[a].key.size(), 6));
  }
  line += fmt::format("{:6}", p.result);
  for (const Column& c : kColumns) {
    line += fmt::format("  {:>{}}", cell(figure(p, c)), std::string_view(c.header).size());
  }
  if (!p.error.empty()) line += "  (the error is above)";
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

std::string parse_sweep_axis(const std::string& text, BenchOptions::SweepAxis& axis) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return fmt::format("--sweep '{}': expected KEY=V1,V2,... (a device-config key)", text);
  }
  axis.key = text.substr(0, eq);
  axis.values.clear();
  const std::string list = text.substr(eq + 1);
  for (size_t begin = 0;;) {
    const size_t comma = list.find(',', begin);
    const std::string value =
        list.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    if (value.empty() || value.find_first_of("=;") != std::string::npos) {
      return fmt::format("--sweep '{}': value '{}' is empty or holds '=' or ';'", text, value);
    }
    axis.values.push_back(value);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (axis.key.find_first_of(";,") != std::string::npos) {
    return fmt::format("--sweep '{}': key '{}' holds ';' or ','", text, axis.key);
  }
  return check_sweep_values(axis);
}

std::string check_sweep_values(const BenchOptions::SweepAxis& axis) {
  std::set<std::string> seen;
  for (const std::string& value : axis.values) {
    if (!seen.insert(value).second) {
      return fmt::format("--sweep {}: value '{}' twice", axis.key, value);
    }
  }
  return {};
}

int run_bench_sweep(const BenchOptions& o) {
  try {
    if (std::string problem = validate(o); !problem.empty()) {
      std::fprintf(stderr, "calrt bench: bad input: %s\n", problem.c_str());
      return kExitUsage;
    }
    if (std::string problem = validate_sweep(o); !problem.empty()) {
      std::fprintf(stderr, "calrt bench: bad input: %s\n", problem.c_str());
      return kExitUsage;
    }
    std::vector<Point> points = points_of(o.sweep);
    for (size_t k = 0; k < points.size(); ++k) points[k].index = k;
    if (o.shard) {
      std::erase_if(points, [&](const Point& p) { return !o.shard->owns(p.index); });
    }
    JsonlStream jsonl;
    if (!o.jsonl.empty()) {
      if (std::string problem = jsonl.open("--jsonl", o.jsonl); !problem.empty()) {
        std::fprintf(stderr, "calrt bench: bad input: %s\n", problem.c_str());
        return kExitUsage;
      }
    }
    std::string keys;
    for (const auto& axis : o.sweep) keys += (keys.empty() ? "" : " x ") + axis.key;
    std::printf(
        "calrt bench --sweep: %s, prompt %u, generate %u, %u runs + %u warmup, "
        "concurrency %u: %zu points over %s\n",
        o.calbin.c_str(), o.prompt_len, o.gen_len, o.runs, o.warmup, o.concurrency, points.size(),
        keys.c_str());
    std::string header;
    for (const auto& axis : o.sweep) {
      header += fmt::format("{:>{}}  ", axis.key, std::max<size_t>(axis.key.size(), 6));
    }
    header += "result";
    for (const Column& c : kColumns) header += std::string("  ") + c.header;
    std::printf("%s\n", header.c_str());
    bool failed = false;
    Progress progress("sweep points", points.size(), o.progress && Progress::terminal());
    size_t done = 0;
    for (Point& p : points) {
      progress.update(done++, fmt::format("{}", fmt::join(p.values, ", ")));
      BenchOptions point = o;
      point.sweep.clear();
      point.table = false;
      point.progress = false;
      point.json.clear();
      point.csv.clear();
      point.md.clear();
      point.jsonl.clear();
      for (size_t a = 0; a < o.sweep.size(); ++a) {
        if (o.sweep[a].key == kCalbinKey) {
          point.calbin = p.values[a];
        } else if (uint32_t* field = bench_field(point, o.sweep[a].key)) {
          *field = static_cast<uint32_t>(std::stoul(p.values[a]));
        } else {
          point.device_config +=
              (point.device_config.empty() ? "" : ";") + o.sweep[a].key + "=" + p.values[a];
        }
      }
      BenchOutcome outcome;
      const int code = run_bench(point, &outcome);
      p.result = code == kExitPass ? "PASS" : code == kExitUsage ? "ERROR" : "FAIL";
      p.error = outcome.error;
      if (!outcome.metrics.empty()) {
        p.metrics = outcome.metrics.back();
        p.mode = outcome.modes.back().mode;
      }
      p.measured = measured_json(point, outcome);
      failed |= code != kExitPass;
      progress.clear();
      print_row(o, p);
      if (code == kExitUsage) {
        // Bad input (an unknown key, a value the device refuses) fails every point alike.
        std::fprintf(stderr, "calrt bench: --sweep stopped at its first point with bad input\n");
        jsonl.write_summary(sweep_envelope(points, "ERROR", p.error), shard_json(o));
        return kExitUsage;
      }
      nlohmann::json record = {{"record", "point"}};
      record.update(point_json(o, p));
      jsonl.write(record);
    }
    const std::string result = failed ? "FAIL" : "PASS";
    int code = failed ? kExitFail : kExitPass;
    if (!o.csv.empty()) {
      if (std::string e = write_text_file(o.csv, sweep_csv(o, points)); !e.empty()) {
        std::fprintf(stderr, "calrt bench: --csv: %s\n", e.c_str());
        code = failed ? code : kExitUsage;
      }
    }
    if (!o.json.empty()) {
      if (std::string e = write_json_file(o.json, sweep_json(o, points, result)); !e.empty()) {
        std::fprintf(stderr, "calrt bench: --json: %s\n", e.c_str());
        code = failed ? code : kExitUsage;
      }
    }
    if (!o.md.empty()) {
      if (std::string e = write_text_file(
              o.md, markdown_report(sweep_envelope(points, result), {sweep_markdown(o, points)}));
          !e.empty()) {
        std::fprintf(stderr, "calrt bench: --md: %s\n", e.c_str());
        code = failed ? code : kExitUsage;
      }
    }
    jsonl.write_summary(sweep_envelope(points, result), shard_json(o));
    if (!jsonl.error().empty()) {
      std::fprintf(stderr, "calrt bench: %s\n", jsonl.error().c_str());
      code = failed ? code : kExitUsage;
    }
    std::printf("bench sweep %s: %zu points\n", result.c_str(), points.size());
    return code;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "calrt bench: internal error: %s\n", error.what());
    return kExitFail;
  }
}

}  // namespace runner
