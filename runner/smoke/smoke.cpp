// `calrt smoke`: stage 9 of the bring-up, the standalone device smoke. Host-side inputs are
// validated first (bad input: exit 2), then steps 1-8 run against the device, each printed
// as one line when it finishes; a step whose prerequisite failed is skipped.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "runner/core/exit_codes.hpp"
#include "runner/core/golden_contract.hpp"
#include "runner/core/report/junit.hpp"
#include "runner/core/report/output_file.hpp"
#include "runner/core/session.hpp"
#include "runner/smoke/smoke.hpp"

namespace runner {

const char* to_string(RunnerBug bug) {
  switch (bug) {
    case RunnerBug::none:
      return "none";
    case RunnerBug::past_kv:
      return "past-kv";
    case RunnerBug::position:
      return "position";
    case RunnerBug::stale_kv:
      return "stale-kv";
    case RunnerBug::tile16:
      return "tile16";
  }
  return "?";
}

namespace {

nlohmann::json context_json(const SmokeOptions& o) {
  nlohmann::json doc = {{"calbin", o.calbin.string()},
                        {"device", o.device},
                        {"device_kind", o.device_kind},
                        {"device_config", o.device_config},
                        {"cases", o.cases},
                        {"timeout_ms", o.timeout_ms},
                        {"min_cosine", o.thresholds.min_cosine},
                        {"min_top_k_overlap", o.thresholds.min_top_k_overlap},
                        {"min_greedy", o.thresholds.min_greedy},
                        {"max_abs_error", o.thresholds.max_abs_error},
                        {"max_gain_bias", o.thresholds.max_gain_bias},
                        {"max_mean_rel_rms", o.thresholds.max_mean_rel_rms},
                        {"tie_margin", o.thresholds.tie_margin}};
  if (o.thresholds.min_free_greedy) {
    doc["min_free_greedy"] = *o.thresholds.min_free_greedy;
  }
  if (o.bug != RunnerBug::none) {
    doc["inject_runner_bug"] = to_string(o.bug);
  }
  return doc;
}

StepResult skipped(int number, const char* name, const std::string& reason) {
  StepResult step;
  step.number = number;
  step.name = name;
  step.status = StepStatus::skip;
  step.summary = "skipped: " + reason;
  return step;
}

void add(Report& report, StepResult step) {
  print_step(stdout, step);
  report.steps.push_back(std::move(step));
}

void run_steps(Session& s, Report& report) {
  add(report, step_device(s));
  add(report, s.device ? step_calbin(s) : skipped(2, "calbin", "no device"));
  add(report, s.calbin ? step_configure(s) : skipped(3, "configure", "no calbin"));
  const bool can_buffer = s.models_ok && s.configured;
  add(report,
      can_buffer ? step_buffers(s) : skipped(4, "buffers", "needs step 2's models and step 3"));
  if (s.buffers_ok) {
    for (StepResult& step : steps_golden(s, report.metrics)) {
      add(report, std::move(step));
    }
  } else {
    add(report, skipped(5, "inputs", "no buffers"));
    add(report, skipped(6, "prefill", "no buffers"));
    add(report, skipped(7, "decode", "no buffers"));
  }
  add(report, s.configured ? step_kv(s) : skipped(8, "kv", "calbin not configured"));
  if (!s.options.resident.empty()) {
    add(report, s.residents.size() == s.options.resident.size()
                    ? step_residents(s)
                    : skipped(9, "resident", "not every resident was configured (step 3)"));
  }
  if (s.info.batch > 1) {
    add(report, s.buffers_ok ? step_batch(s) : skipped(10, "batch", "no buffers"));
  }
}

std::vector<std::string> summary_lines(const nlohmann::json& m) {
  if (m.empty()) {
    return {};
  }
  auto verdict = [](const nlohmann::json& gate) {
    if (!gate.contains("threshold")) {
      return std::string("(not gated)");
    }
    return fmt::format("{} (threshold {})", gate["pass"].get<bool>() ? "ok" : "FAIL",
                       gate["threshold"].dump());
  };
  const auto& greedy = m["greedy_agreement"];
  const auto& free = m["free_running_agreement"];
  const auto& contract = m["contract"];
  const std::string source = contract.value("source", std::string());
  const bool have_rows = source.starts_with("the golden set") || source.starts_with("computed");
  const std::string contract_line =
      contract["available"].get<bool>()
          ? fmt::format(
                "contract error max     {:.2f} BF16 ULPs {}, mean {:.4f} {} over {} rows "
                "({} of {} logits differ; contract rows: {})",
                contract["value"].get<double>(), verdict(contract),
                contract["mean"]["value"].get<double>(), verdict(contract["mean"]),
                contract["rows"].get<uint64_t>(), contract["differing_logits"].get<uint64_t>(),
                contract["logits"].get<uint64_t>(), source)
      : have_rows ? std::string(
                        "contract error         not compared (no job's logits reached "
                        "the comparison)")
                  : "contract error         not available: " + source;
  if (m["compared"].get<uint64_t>() == 0) {
    // Gates over nothing pass vacuously; saying "ok" would read as a measurement.
    return {contract_line,
            "golden comparisons     none made (every case failed before its "
            "first comparison)"};
  }
  return {
      contract_line,
      fmt::format("logits cosine min      {:.6f} {}", m["cosine_min"]["value"].get<double>(),
                  verdict(m["cosine_min"])),
      fmt::format("max abs error          {:.5f} {}", m["max_abs_error_max"]["value"].get<double>(),
                  verdict(m["max_abs_error_max"])),
      fmt::format("top-k overlap min      {:.4f} {}", m["top_k_overlap_min"]["value"].get<double>(),
                  verdict(m["top_k_overlap_min"])),
      fmt::format("greedy agreement       {:.4f} = {}/{} {}", greedy["value"].get<double>(),
                  greedy["agreed"].get<uint64_t>(), greedy["total"].get<uint64_t>(),
                  verdict(greedy)),
      fmt::format("free-running agreement {:.4f} = {}/{} {}", free["value"].get<double>(),
                  free["agreed_tokens"].get<uint64_t>(), free["total_tokens"].get<uint64_t>(),
                  verdict(free))};
}

// The steps as JUnit testcases (classname "smoke", name "5 inputs"): a failed step's
// failures and diagnosis are its message; bad input before any step is one failed case.
std::vector<JunitSuite> smoke_junit(const Report& report) {
  JunitSuite suite{"smoke", {}};
  if (!report.error.empty()) {
    suite.cases.push_back({"smoke", "bad input", JunitCase::Outcome::fail, report.error, 0.0});
  }
  for (const StepResult& step : report.steps) {
    JunitCase c{"smoke",
                fmt::format("{} {}", step.number, step.name),
                JunitCase::Outcome::pass,
                {},
                step.wall_ms / 1000.0};
    if (step.status == StepStatus::fail) {
      c.outcome = JunitCase::Outcome::fail;
      std::vector<std::string> lines = step.failures;
      lines.insert(lines.end(), step.diagnosis.begin(), step.diagnosis.end());
      c.message = fmt::format("{}", fmt::join(lines, "\n"));
    } else if (step.status == StepStatus::skip) {
      c.outcome = JunitCase::Outcome::skip;
      c.message = step.summary;
    }
    suite.cases.push_back(std::move(c));
  }
  return {suite};
}

// Writes the JSON and JUnit reports when asked; a failure to write one is reported and
// turns a pass into a usage error, since the caller asked for a file it will not get.
int finish(const SmokeOptions& options, Report& report, int exit_code) {
  std::vector<std::string> errors;
  if (options.json) {
    if (std::string e = write_json_file(*options.json, report.to_json()); !e.empty()) {
      errors.push_back(e);
    }
  }
  if (options.junit) {
    if (std::string e = write_junit_file(*options.junit, "calrt smoke", smoke_junit(report));
        !e.empty()) {
      errors.push_back("--junit: " + e);
    }
  }
  for (const std::string& e : errors) {
    std::fprintf(stderr, "calrt smoke: %s\n", e.c_str());
  }
  return errors.empty() || exit_code != kExitPass ? exit_code : kExitUsage;
}

int bad_input(const SmokeOptions& options, Report& report, const std::string& message) {
  std::fprintf(stderr, "calrt smoke: bad input: %s\n", message.c_str());
  report.error = message;
  return finish(options, report, kExitUsage);
}

}  // namespace

// The baseline, when given, and the gates a run without a contract reference keeps: an
// error (bad input) for a baseline that cannot be read or ran another golden set.
std::string choose_gates(SmokeOptions& options, const ContractSource& contract, Session& s) {
  if (options.baseline) {
    auto baseline = read_baseline(*options.baseline);
    if (!baseline) return "--baseline " + baseline.error();
    const std::string here = golden_fingerprint(s.inputs.golden, s.inputs.case_indices);
    if (baseline->golden_fingerprint != here) {
      return "--baseline " + options.baseline->string() +
             ": it ran another golden set or "
             "other cases (golden fingerprint " +
             baseline->golden_fingerprint.substr(0, 16) + " against this run's " +
             here.substr(0, 16) +
             "): a baseline holds only on the "
             "rows it measured";
    }
    s.baseline = std::move(*baseline);
  }
  if (!contract.available) {
    Thresholds& t = options.thresholds;
    // A baseline judges the distribution metrics by itself (smoke_golden.cpp); the fixed
    // thresholds hold only where given on the command line.
    t.distribution_gated = options.distribution_explicit;
    if (!options.rank_explicit) {
      t.min_greedy = kNoContractMinGreedy;
      t.min_top_k_overlap = kNoContractMinTopK;
    }
  }
  return {};
}

int run_smoke(const SmokeOptions& requested) {
  Report report;
  report.command = "smoke";
  report.context = context_json(requested);
  // What the calbin declares may set some thresholds (Thresholds::routed_model).
  SmokeOptions options = requested;
  try {
    Session s(options);
    // Checked first: a run must not end in a report it cannot write.
    for (const auto& [flag, path] :
         {std::pair{"--json", options.json}, std::pair{"--junit", options.junit}}) {
      if (!path) continue;
      if (std::string problem = check_output_path(flag, *path, options.calbin); !problem.empty()) {
        std::fprintf(stderr, "calrt smoke: bad input: %s\n", problem.c_str());
        return kExitUsage;
      }
    }
    if (options.json && options.junit && same_file(*options.json, *options.junit)) {
      std::fprintf(stderr, "calrt smoke: bad input: --json and --junit name the same file\n");
      return kExitUsage;
    }
    try {
      s.device_spec = parse_device(options.device, options.device_kind, options.device_index,
                                   options.device_config);
    } catch (const std::exception& error) {
      return bad_input(options, report, error.what());
    }
    auto inputs = load_host_inputs(options);
    if (!inputs) {
      return bad_input(options, report, inputs.error());
    }
    s.inputs = std::move(*inputs);
    auto contract = complete_contract_rows(options, s.inputs);
    if (!contract) {
      return bad_input(options, report, contract.error());
    }
    s.inputs.contract_source = contract->description;
    if (auto gates = choose_gates(options, *contract, s); !gates.empty()) {
      return bad_input(options, report, gates);
    }
    options.thresholds.routed_model = s.inputs.manifest.llm.experts > 0;
    try {
      s.api = open_runtime(s.device_spec);
    } catch (const std::exception& error) {  // LoadError, or a backend this build lacks
      return bad_input(options, report, error.what());
    }
    std::printf(
        "calrt smoke: %s on %s, %zu golden cases from %s%s\n", options.calbin.c_str(),
        describe(s.device_spec).c_str(), s.inputs.case_indices.size(), s.inputs.golden_dir.c_str(),
        options.bug == RunnerBug::none
            ? ""
            : fmt::format(" [TEST ONLY: injected runner bug {}]", to_string(options.bug)).c_str());
    run_steps(s, report);
  } catch (const std::exception& error) {
    // Steps catch their own errors; this is the last line of defence against a bug here.
    StepResult step;
    step.name = "internal";
    step.fail(std::string("unexpected error: ") + error.what());
    add(report, std::move(step));
  }
  report.summary = summary_lines(report.metrics);
  print_summary(stdout, report);
  return finish(options, report, report.passed() ? kExitPass : kExitFail);
}

}  // namespace runner
