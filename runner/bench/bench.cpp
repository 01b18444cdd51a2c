// `calrt bench`: orchestration. Options and host-side inputs first (exit 2), then the
// device, sync and/or parallel mode, the figures and the outputs.
#include "runner/bench/bench.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <system_error>
#include <utility>

#include "runner/bench/bench_device_trace.hpp"
#include "runner/bench/bench_engine.hpp"
#include "runner/bench/bench_host_time.hpp"
#include "runner/bench/bench_metrics.hpp"
#include "runner/bench/bench_report.hpp"
#include "runner/bench/bench_session.hpp"
#include "runner/bench/bench_trace.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/core/report/jsonl.hpp"
#include "runner/core/report/markdown.hpp"
#include "runner/core/report/report.hpp"

namespace runner {

const char* to_string(BenchModes modes) {
  switch (modes) {
    case BenchModes::sync:
      return "sync";
    case BenchModes::parallel:
      return "parallel";
    case BenchModes::both:
      return "both";
  }
  return "?";
}

const char* to_string(HostTimeMode mode) { return mode == HostTimeMode::model ? "model" : "wall"; }

namespace {

nlohmann::json settings_json(const BenchOptions& o) {
  return {
      {"prompt_len", o.prompt_len},
      {"gen_len", o.gen_len},
      {"runs", o.runs},
      {"warmup", o.warmup},
      {"concurrency", o.concurrency},
      {"modes", to_string(o.modes)},
      {"prompt_seed", o.seed},
      {"prompt",
       "token ids uniform in [0, vocab) from SplitMix64 seeded by (prompt_seed, run, "
       "request)"},
      {"sampling",
       {{"method", to_string(o.sampling.method)},
        {"top_k", o.sampling.top_k},
        {"temperature", o.sampling.temperature},
        {"seed", o.sampling.seed}}},
      {"host_time",
       {{"mode", to_string(o.host_time)},
        {"gbps", o.host_model.gbps},
        {"overhead_ns", o.host_model.overhead_ns},
        {"model",
         "charged ns = overhead_ns + ceil(bytes / gbps); bytes: prepare = token + position "
         "tensor bytes; greedy: rank = logits tensor bytes (ranked from BF16, no FP32 row); "
         "top-k: bf16->fp32 = logits tensor bytes + 4 * vocab, sampling = 8 * vocab"},
        {"used", o.host_time == HostTimeMode::model
                     ? "host figures are the modelled values above"
                     : "host figures are measured (steady clock); the model is not used"}}},
      {"timeout_ms", o.timeout_ms},
      {"trace_capacity", o.trace_capacity},
      {"d2d_spans", o.d2d_spans},
  };
}

nlohmann::json calbin_json(const BenchSession& s) {
  return {{"path", s.options.calbin.string()},
          {"manifest_sha256", s.manifest_sha256},
          {"calbin_version", s.manifest.calbin_version},
          {"architecture", s.manifest.architecture},
          {"runtime_abi", s.manifest.runtime_abi},
          {"timing_only", s.manifest.timing_only},
          {"vocab", s.manifest.llm.vocab},
          {"context", s.manifest.llm.context},
          {"prefill_chunk", s.manifest.llm.prefill_chunk},
          {"layers", s.manifest.llm.layers},
          {"chips", s.manifest.chips}};
}

nlohmann::json device_json(const BenchSession& s, const HostTime& host, bool trace_extension) {
  const calrt::DeviceStatus& st = s.device_status;
  nlohmann::json doc = {
      {"device", describe(s.device_spec)},
      {"backend", to_string(s.device_spec.backend)},
      {"kind", s.options.device_kind},
      {"index", s.options.device_index},
      // The option string as passed to Device_Create: with the simulator's documented
      // defaults (simdev/device/README.md) it fixes the device model.
      {"config", s.options.device_config},
      {"device_name", st.device_name},
      {"runtime_version", st.runtime_version},
      {"firmware_version", st.firmware_version},
      {"driver_version", st.driver_version},
      {"abi", fmt::format("{}.{}.{}", st.abi_major, st.abi_minor, st.abi_patch)},
      {"runner_abi", fmt::format("{}.{}.{}", CALRT_ABI_MAJOR, CALRT_ABI_MINOR, CALRT_ABI_PATCH)},
      {"chips", st.chip_count},
      {"clock_extension", host.charges_device()},
      {"clock_mode", host.device_clock_mode()},
      {"trace_extension", trace_extension},
      {"configure_device_ms",
       std::chrono::duration<double, std::milli>(s.configured.configure_time).count()}};
  return doc;
}

int write_outputs(const BenchOptions& o, BenchOutcome& outcome, const std::string& trace_text,
                  int exit_code, JsonlStream* jsonl = nullptr) {
  std::vector<std::string> errors;
  if (!o.md.empty()) {
    if (std::string e = write_text_file(
            o.md, markdown_report(bench_envelope(outcome, o), bench_markdown_tables(outcome)));
        !e.empty()) {
      errors.push_back("--md: " + e);
    }
  }
  if (jsonl != nullptr) {
    jsonl->write_summary(bench_envelope(outcome, o));
    if (!jsonl->error().empty()) {
      errors.push_back(jsonl->error());
    }
  }
  if (!o.trace.empty() && !trace_text.empty()) {
    if (std::string e = write_text_file(o.trace, trace_text); !e.empty()) {
      errors.push_back("--trace: " + e);
    }
  }
  if (!o.csv.empty() && outcome.metrics.size() == outcome.modes.size() && !outcome.modes.empty()) {
    if (std::string e = write_text_file(o.csv, bench_report_csv(outcome)); !e.empty()) {
      errors.push_back("--csv: " + e);
    }
  }
  if (!o.json.empty()) {
    if (std::string e = write_json_file(o.json, bench_report_json(outcome, o)); !e.empty()) {
      errors.push_back("--json: " + e);
    }
  }
  for (const std::string& e : errors) {
    std::fprintf(stderr, "calrt bench: %s\n", e.c_str());
  }
  // The caller asked for a file it will not get: a pass becomes a usage error.
  return errors.empty() || exit_code != kExitPass ? exit_code : kExitUsage;
}

int usage_error(const BenchOptions& o, BenchOutcome& outcome, const std::string& message,
                JsonlStream* jsonl = nullptr) {
  std::fprintf(stderr, "calrt bench: bad input: %s\n", message.c_str());
  outcome.result = "ERROR";
  outcome.error = message;
  return write_outputs(o, outcome, {}, kExitUsage, jsonl);
}

}  // namespace

std::string validate(const BenchOptions& o) {
  std::error_code error;
  if (!std::filesystem::is_directory(o.calbin, error)) {
    return fmt::format("CALBIN '{}': not a directory", o.calbin.string());
  }
  if (o.sampling.method == SamplingMethod::top_k && o.sampling.top_k == 0) {
    return "--top-k 0: keep at least one candidate";
  }
  if (!(o.sampling.temperature > 0.0)) {
    return fmt::format("--temperature {}: must be > 0", o.sampling.temperature);
  }
  if (!(o.host_model.gbps > 0.0)) {
    return fmt::format("--host-gbps {}: must be > 0", o.host_model.gbps);
  }
  const std::pair<const char*, std::filesystem::path> outputs[] = {{"--json", o.json},
                                                                   {"--csv", o.csv},
                                                                   {"--trace", o.trace},
                                                                   {"--md", o.md},
                                                                   {"--jsonl", o.jsonl}};
  for (const auto& [flag, path] : outputs) {
    if (path.empty() || path == "-") continue;  // not asked for, or stdout
    if (std::string problem = check_output_path(flag, path, o.calbin); !problem.empty()) {
      return problem;
    }
  }
  for (size_t a = 0; a < std::size(outputs); ++a) {
    for (size_t b = a + 1; b < std::size(outputs); ++b) {
      if (same_file(outputs[a].second, outputs[b].second)) {
        return fmt::format("{} and {} name the same file '{}'", outputs[a].first, outputs[b].first,
                           outputs[a].second.string());
      }
    }
  }
  return {};
}

int run_bench(const BenchOptions& o, BenchOutcome* out) {
  BenchOutcome local;
  BenchOutcome& outcome = out != nullptr ? *out : local;
  outcome.environment["settings"] = settings_json(o);
  try {
    if (std::string problem = validate(o); !problem.empty()) {
      return usage_error(o, outcome, problem);
    }
    JsonlStream jsonl;
    if (!o.jsonl.empty()) {
      if (std::string problem = jsonl.open("--jsonl", o.jsonl); !problem.empty()) {
        return usage_error(o, outcome, problem);
      }
    }
    BenchSession s(o);
    try {
      load_bench_inputs(s);
    } catch (const BenchUsageError& error) {
      return usage_error(o, outcome, error.what(), &jsonl);
    }
    outcome.environment["calbin"] = calbin_json(s);
    if (o.table) {
      std::printf(
          "calrt bench: %s on %s: prompt %u, generate %u, %u runs + %u warmup, concurrency %u, "
          "mode %s, sampling %s, host time %s\n",
          o.calbin.c_str(), describe(s.device_spec).c_str(), o.prompt_len, o.gen_len, o.runs,
          o.warmup, o.concurrency, to_string(o.modes), to_string(o.sampling.method),
          to_string(o.host_time));
      std::fflush(stdout);
    }

    int exit_code = kExitPass;
    DeviceTraceCollector collector;
    std::string trace_text;
    std::vector<ModeRecord> traced;  // every mode begun, also one that failed part-way
    try {
      open_bench_device(s);
      HostTime host(o.host_time, o.host_model, s.device);
      const bool trace_extension = static_cast<bool>(calrt::DeviceTrace::of(s.device));
      outcome.environment["device"] = device_json(s, host, trace_extension);
      outcome.environment["calbin"]["prefill_model"] = s.prefill.name();
      outcome.environment["calbin"]["decode_model"] = s.decode.name();
      if (!host.charges_device()) {
        spdlog::warn(
            "the runtime has no clock extension: host work is not charged to the device clock "
            "(on real hardware the device clock is real and contains it already)");
      }
      if (!o.trace.empty() || o.d2d_spans) {
        collector.set_keep({.events = !o.trace.empty(),
                            .layers = o.trace_layers,
                            .max_events = o.trace_max_events});
        collector.start(s.device, o.trace_capacity);
        if (!collector.unavailable().empty()) {
          spdlog::warn("{}: {}", o.trace.empty() ? "--d2d-spans" : "--trace",
                       collector.unavailable());
        }
      }
      BenchEngine engine(s, host, collector);
      const uint64_t modes = o.modes == BenchModes::both ? 2 : 1;
      Progress progress("bench runs", modes * (o.warmup + o.runs),
                        o.progress && o.table && Progress::terminal());
      engine.set_progress(&progress);
      if (jsonl.active()) {
        engine.set_run_observer([&jsonl](const ModeRecord& mode, const RunKey& run) {
          if (!run.warmup) jsonl.write(bench_run_record(mode, run));
        });
      }
      try {
        for (const bool parallel : {false, true}) {
          if (o.modes == (parallel ? BenchModes::sync : BenchModes::parallel)) {
            continue;
          }
          engine.run_mode(parallel, traced.emplace_back());
          outcome.modes.push_back(traced.back());
        }
        collector.stop();
      } catch (...) {
        try {
          collector.stop();  // keep what the device recorded up to the failure
        } catch (const std::exception&) {
        }
        throw;
      }
    } catch (const BenchUsageError& error) {
      std::fprintf(stderr, "calrt bench: bad input: %s\n", error.what());
      outcome.result = "ERROR";
      outcome.error = error.what();
      exit_code = kExitUsage;
    } catch (const std::exception& error) {
      std::fprintf(stderr, "calrt bench: FAIL: %s\n", error.what());
      outcome.result = "FAIL";
      outcome.error = error.what();
      exit_code = kExitFail;
    }

    const std::string host_clock = o.host_time == HostTimeMode::model ? "host-model" : "host-wall";
    for (const ModeRecord& mode : outcome.modes) {
      outcome.metrics.push_back(compute_metrics(mode, o, host_clock));
    }
    if (outcome.modes.size() == 2) {
      outcome.comparison =
          compare_modes(outcome.modes[0], outcome.metrics[0], outcome.modes[1], outcome.metrics[1]);
      if (!outcome.comparison.tokens_identical || !outcome.comparison.logits_identical) {
        std::fprintf(stderr, "calrt bench: FAIL: sync and parallel mode differ: %s\n",
                     outcome.comparison.first_difference.c_str());
        outcome.result = "FAIL";
        outcome.error = "sync and parallel mode differ: " + outcome.comparison.first_difference;
        exit_code = exit_code == kExitPass ? kExitFail : exit_code;
      }
    }
    if (collector.recorded()) {
      outcome.d2d_spans = nlohmann::json::array();
      for (const auto& [bytes, size] : collector.d2d_sizes()) {
        outcome.d2d_spans.push_back(
            {{"bytes", bytes},
             {"count", size.count},
             {"mean_ns", static_cast<double>(size.sum_ns) / static_cast<double>(size.count)},
             {"min_ns", size.min_ns},
             {"max_ns", size.max_ns}});
      }
    }
    if (!o.trace.empty() && exit_code != kExitUsage) {
      BenchTraceCounts counts;
      trace_text =
          bench_chrome_trace(collector.events(), traced, s.device ? s.device_status.chip_count : 0,
                             o.trace_warmup, &counts);
      outcome.trace = {
          {"device_events", counts.device_events},
          {"host_events", counts.host_events},
          {"dropped_device_events", collector.dropped()},
          {"discarded_device_events", collector.discarded()},
          {"runs", o.trace_warmup ? "all" : "measured"},
          {"level", o.trace_layers ? "layer" : "job"},
          {"unmatched_device_jobs", counts.unmatched_job_serials},
          {"device_trace", collector.recorded()               ? "recorded"
                           : !collector.unavailable().empty() ? collector.unavailable()
                                                              : "not started: the bench failed "
                                                                "before its runs"}};
      if (collector.dropped() > 0) {
        spdlog::warn(
            "--trace: the device dropped {} events (its trace buffer was full between drains); "
            "raise --trace-capacity",
            collector.dropped());
      }
      if (collector.discarded() > 0) {
        spdlog::warn(
            "--trace: {} device events past --trace-max-events {} were not kept; raise it, or "
            "use --trace-level job",
            collector.discarded(), o.trace_max_events);
      }
    }
    if (o.table) {
      if (!outcome.modes.empty()) {
        print_bench_table(stdout, outcome);
      }
      std::printf("bench %s\n", outcome.result.c_str());
      std::fflush(stdout);
    }
    return write_outputs(o, outcome, trace_text, exit_code, &jsonl);
  } catch (const std::exception& error) {
    // Everything above catches its own errors; this is the last line of defence.
    std::fprintf(stderr, "calrt bench: internal error: %s\n", error.what());
    return kExitFail;
  }
}

}  // namespace runner
