// calrt: the standalone runner for the CalRT runtime. This file only parses arguments and
// dispatches to a subcommand; each subcommand lives in its own file.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>

#include "runner/bench.hpp"
#include "runner/bench_cli.hpp"
#include "runner/check.hpp"
#include "runner/conformance_cli.hpp"
#include "runner/device_select.hpp"
#include "runner/exit_codes.hpp"
#include "runner/info.hpp"
#include "runner/inspect.hpp"
#include "runner/plan.hpp"
#include "runner/replay.hpp"
#include "runner/scenario_options.hpp"
#include "runner/smoke_options.hpp"

namespace {

constexpr const char* kExitCodes =
    "Exit codes: 0 every step passed; 1 a step failed (device or runtime error, job failure "
    "or timeout, a check or metric below its threshold); 2 usage or bad input found on the "
    "host before any device step (options, a missing or malformed calbin or golden set, a "
    "file with a wrong size or hash, a runtime library that cannot be loaded).";

struct DeviceFlags {
  std::string* device;
  std::string* kind;
  uint32_t* index;
  std::string* config;
};

void add_device_options(CLI::App& app, const DeviceFlags& flags) {
  app.add_option("--device", *flags.device,
                 "sim (the simulator in process), a runtime library path (e.g. "
                 "build/simdev/runtime/libcalrt_sim.so), or unix:SOCKET / tcp:HOST:PORT (a "
                 "`simdev serve` daemon)")
      ->capture_default_str();
  app.add_option("--device-kind", *flags.kind, "device kind passed to Device_Create")
      ->check(CLI::IsMember({"sim", "pcie"}))
      ->capture_default_str();
  app.add_option("--device-index", *flags.index, "device index passed to Device_Create")
      ->capture_default_str();
  app.add_option("--device-config", *flags.config,
                 "runtime option string for Device_Create, e.g. \"seed=1;dram_mib=4096\"");
  // The layer is chosen with `--device validate:INNER`; --record implies it.
  app.add_option_function<std::string>(
      "--record", [](const std::string& path) { runner::set_record_file(path); },
      "record every ABI call to FILE (calrt-calls/1, for `calrt replay`) through the "
      "validation layer, as --device validate:INNER does");
}

void add_smoke(CLI::App& app, runner::SmokeOptions& o, std::string& bug,
               std::map<std::string, CLI::Option*>& optional) {
  app.add_option("CALBIN", o.calbin, "calbin directory")->required();
  add_device_options(app, {&o.device, &o.device_kind, &o.device_index, &o.device_config});
  app.add_option("--golden", o.golden, "golden directory (default: the calbin's golden index)");
  app.add_option("--cases", o.cases, "short, all (adds the long cases) or NAME,NAME")
      ->capture_default_str();
  app.add_option("--prefill-model", o.prefill_model,
                 "exact prefill model name (default: the calbin's only prefill model)");
  app.add_option("--decode-model", o.decode_model,
                 "exact decode model name (default: the calbin's only decode model)");
  app.add_option("--json", o.json, "write the JSON report to this file (atomically)");
  app.add_option("--min-cosine", o.thresholds.min_cosine, "minimum logits cosine")
      ->check(CLI::Range(-1.0, 1.0))
      ->capture_default_str();
  optional["max_abs"] = app.add_option("--max-abs-error", o.thresholds.max_abs_error.emplace(),
                                       "maximum abs logits error at the golden top ids "
                                       "(default: reported, not gated)");
  app.add_option("--min-topk-overlap", o.thresholds.min_top_k_overlap, "minimum top-k overlap")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--min-greedy", o.thresholds.min_greedy,
                 "minimum teacher-forced greedy agreement rate")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  optional["min_free"] = app.add_option("--min-free-greedy", o.thresholds.min_free_greedy.emplace(),
                                        "minimum free-running agreed-prefix rate (default: "
                                        "reported, not gated)")
                             ->check(CLI::Range(0.0, 1.0));
  app.add_option("--timeout-ms", o.timeout_ms,
                 "bound of every device wait (device time for the simulator)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--inject-runner-bug", bug,
                 "TEST ONLY: make the runner itself wrong (past-kv, position or stale-kv) to "
                 "prove the smoke catches and diagnoses it")
      ->check(CLI::IsMember({"past-kv", "position", "stale-kv"}))
      ->group("Test-only options");
  app.footer(kExitCodes);
}

runner::RunnerBug parse_bug(const std::string& text) {
  if (text == "past-kv") {
    return runner::RunnerBug::past_kv;
  }
  if (text == "position") {
    return runner::RunnerBug::position;
  }
  return text == "stale-kv" ? runner::RunnerBug::stale_kv : runner::RunnerBug::none;
}

void add_check(CLI::App& app, runner::CheckCommandOptions& o) {
  app.add_option("CALBIN", o.calbin, "calbin directory");
  app.add_option("--manifest", o.service_manifest,
                 "service manifest (YAML) the calbin must agree with");
  app.add_option("--json", o.json, "write the JSON report to this file (atomically)");
  app.add_option("--usable-gib", o.usable_gib_per_chip,
                 "physical usable memory per chip for the capacity inequality")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--list", o.list, "list every check and exit");
  app.footer("Exit codes: 0 no check failed; 1 a check failed; 2 usage error.");
}

void add_inspect(CLI::App& app, runner::InspectOptions& o) {
  app.add_option("CALBIN", o.calbin, "calbin directory")->required();
  app.add_option("--json", o.json, "write the JSON report to this file (atomically)");
  app.add_option("--usable-gib", o.usable_gib_per_chip, "usable memory per chip for the map")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

// Geometry flags are optional overrides: their values only count when given.
struct PlanFlags {
  uint64_t layers = 0, kv_heads = 0, head_dim = 0, context = 0, batch = 0;
  uint32_t chips = 0;
  std::string k_dtype, v_dtype;
  std::map<std::string, CLI::Option*> given;
};

void add_plan(CLI::App& app, runner::PlanOptions& o, PlanFlags& f) {
  app.add_option("CALBIN", o.calbin, "calbin directory (optional: flags alone also work)");
  f.given["layers"] = app.add_option("--layers", f.layers, "transformer layers");
  f.given["kv_heads"] = app.add_option("--kv-heads", f.kv_heads, "KV heads");
  f.given["head_dim"] = app.add_option("--head-dim", f.head_dim, "head dimension");
  f.given["context"] = app.add_option("--context", f.context, "context length (tokens)");
  f.given["batch"] = app.add_option("--batch", f.batch, "batch size");
  f.given["chips"] = app.add_option("--chips", f.chips, "chips the KV heads are split over");
  f.given["k_dtype"] = app.add_option("--k-dtype", f.k_dtype, "K cache dtype (bf16, int8, ...)");
  f.given["v_dtype"] = app.add_option("--v-dtype", f.v_dtype, "V cache dtype (bf16, int8, ...)");
  app.add_option("--params-gib", o.params_gib_per_chip, "parameters per chip (flags only)");
  app.add_option("--workspace-mib", o.workspace_mib, "peak workspace per chip (flags only)");
  app.add_option("--io-mib", o.io_mib, "I/O and command buffers per chip (flags only)");
  app.add_option("--guard-mib", o.guard_mib, "allocator guard per chip (flags only)");
  app.add_option("--usable-gib", o.usable_gib_per_chip, "physical usable memory per chip")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--json", o.json, "write the JSON report to this file (atomically)");
  app.footer("Exit codes: 0 it fits on every chip; 1 it does not; 2 usage or bad input.");
}

// Copies the flags that were given into the plan's overrides; flags-only mode needs the
// whole geometry.
bool finish_plan(runner::PlanOptions& o, const PlanFlags& f) {
  auto set = [&](const char* key, auto value, auto& target) {
    if (f.given.at(key)->count() > 0) {
      target = value;
    }
  };
  set("layers", f.layers, o.layers);
  set("kv_heads", f.kv_heads, o.kv_heads);
  set("head_dim", f.head_dim, o.head_dim);
  set("context", f.context, o.context);
  set("batch", f.batch, o.batch);
  set("chips", f.chips, o.chips);
  set("k_dtype", f.k_dtype, o.k_dtype);
  set("v_dtype", f.v_dtype, o.v_dtype);
  if (o.calbin.empty() && (!o.layers || !o.kv_heads || !o.head_dim || !o.context)) {
    std::fprintf(stderr,
                 "calrt plan: without a CALBIN, --layers, --kv-heads, --head-dim and --context "
                 "are required\n");
    return false;
  }
  return true;
}

// --seed and --campaign only count when given; CLI11 fills plain values.
struct ScenarioFlags {
  uint64_t seed = 1;
  uint32_t campaign = 0;
  CLI::Option* seed_option = nullptr;
  CLI::Option* campaign_option = nullptr;
};

void add_scenario(CLI::App& app, runner::ScenarioOptions& o, ScenarioFlags& f) {
  app.add_option("FILE", o.files, "scenario files (scenarios/*.yaml)");
  f.seed_option = app.add_option("--seed", f.seed,
                                 "override each file's seed; with --campaign, the first plan's "
                                 "seed (default 1)");
  f.campaign_option = app.add_option("--campaign", f.campaign,
                                     "run N random fault plans (seeds S, S+1, ...) over the "
                                     "built-in workload");
  app.add_flag("--sweep", o.sweep,
               "sweep every FILE: each fault kind, transient and persistent, at the 1st, 2nd, "
               "... eligible device operation");
  app.add_option("--calbin-dir", o.calbin_dir,
                 "calbins by preset name, DIR/<preset>; a missing one is generated there")
      ->capture_default_str();
  app.add_option("--device", o.device,
                 "sim (the simulator in process) or a runtime library path (e.g. "
                 "build/simdev/runtime/libcalrt_sim.so)")
      ->capture_default_str();
  app.add_option("--json", o.json, "write the JSON report (calrt-scenario/1) to this file");
  app.add_flag("--coverage", o.coverage,
               "after the run, print the fault hits per (kind, site) summed over every run");
  app.add_option("--policy-bug", o.policy_bug,
                 "TEST ONLY: make the recovery policy wrong in one way (no-reset, no-timeout, "
                 "single-level, no-reload, no-replay, lost-as-request, skip-output-check, "
                 "reset-on-degraded, reset-request-faults) to prove a scenario catches it")
      ->check(CLI::IsMember({"none", "no-reset", "no-timeout", "single-level", "no-reload",
                             "no-replay", "lost-as-request", "skip-output-check",
                             "reset-on-degraded", "reset-request-faults"}))
      ->group("Test-only options");
  app.footer(
      "Exit codes: 0 every scenario, plan or sweep passed; 1 one failed (a FAIL line with the "
      "command that replays it); 2 bad input found before anything ran (a scenario file's "
      "field, a missing calbin, a device option or fault plan the runtime refuses).");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"calrt: the standalone runner for the CalRT runtime of the Calculet NPU"};
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging on stderr");
  app.fallthrough();

  runner::SmokeOptions smoke_options;
  std::string bug;
  std::map<std::string, CLI::Option*> optional;
  CLI::App* smoke = app.add_subcommand(
      "smoke",
      "stage 9 device smoke: device, calbin, configure, buffers, prefill and decode "
      "against golden, KV checks");
  add_smoke(*smoke, smoke_options, bug, optional);

  runner::InfoOptions info_options;
  CLI::App* info = app.add_subcommand("info", "device status and every chip's status");
  add_device_options(*info, {&info_options.device, &info_options.device_kind,
                             &info_options.device_index, &info_options.device_config});
  info->add_option("--json", info_options.json, "write the JSON report to this file");
  info->footer(kExitCodes);

  runner::CheckCommandOptions check_options;
  CLI::App* check = app.add_subcommand(
      "check", "stage 8 static acceptance of a calbin, device-free: every blocking item");
  add_check(*check, check_options);

  runner::InspectOptions inspect_options;
  CLI::App* inspect = app.add_subcommand(
      "inspect", "what a calbin holds: models, tensors, CSRs, op inventory, memory map");
  add_inspect(*inspect, inspect_options);

  runner::PlanOptions plan_options;
  PlanFlags plan_flags;
  CLI::App* plan = app.add_subcommand(
      "plan", "capacity plan: KV bytes, the per-chip inequality, largest context and batch");
  add_plan(*plan, plan_options, plan_flags);

  runner::BenchOptions bench_options;
  runner::BenchCliWords bench_words;
  CLI::App* bench = app.add_subcommand(
      "bench",
      "timing: TTFT, prefill/decode/end-to-end tok/s, TPOT and the per-job phases as "
      "P50/P90/P99, in sync and parallel mode; JSON/CSV reports and a Chrome trace");
  add_device_options(*bench, {&bench_options.device, &bench_options.device_kind,
                              &bench_options.device_index, &bench_options.device_config});
  runner::add_bench_options(*bench, bench_options, bench_words);

  runner::ScenarioOptions scenario_options;
  ScenarioFlags scenario_flags;
  CLI::App* scenario = app.add_subcommand(
      "scenario",
      "deterministic fault-injection scenarios (scenarios/README.md), random fault campaigns "
      "and exhaustive sweeps, under the runner's recovery policy");
  add_scenario(*scenario, scenario_options, scenario_flags);

  runner::ConformanceCommandOptions conformance_options;
  CLI::App* conformance = app.add_subcommand(
      "conformance", "the runtime ABI conformance suite (abi/CONFORMANCE.md), clause by clause");
  add_device_options(*conformance,
                     {&conformance_options.device, &conformance_options.device_kind,
                      &conformance_options.device_index, &conformance_options.device_config});
  runner::add_conformance_options(*conformance, conformance_options);

  runner::ReplayOptions replay_options;
  CLI::App* replay = app.add_subcommand(
      "replay",
      "re-issue a call recording (--record, calrt-calls/1) against a runtime and compare every "
      "result with the recording");
  replay->add_option("FILE", replay_options.file, "the recording (JSON Lines)")->required();
  replay
      ->add_option("--device", replay_options.device,
                   "sim (the simulator in process) or a runtime library path")
      ->capture_default_str();
  replay->add_option("--calbin", replay_options.calbin,
                     "load this calbin instead of the recorded Calbin_Create paths");
  replay->add_option("--json", replay_options.json, "write the JSON report to this file");
  replay->footer(
      "Exit codes: 0 every call answered as recorded; 1 divergences (one line each); 2 a bad "
      "recording (file, line and field named) or a runtime that cannot be loaded.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? runner::kExitPass : runner::kExitUsage;
  }
  spdlog::set_default_logger(spdlog::stderr_color_st("calrt"));
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  if (optional["max_abs"]->count() == 0) {
    smoke_options.thresholds.max_abs_error.reset();
  }
  if (optional["min_free"]->count() == 0) {
    smoke_options.thresholds.min_free_greedy.reset();
  }
  smoke_options.bug = parse_bug(bug);
  if (smoke->parsed()) {
    return runner::run_smoke(smoke_options);
  }
  if (bench->parsed()) {
    runner::finish_bench_options(bench_options, bench_words, argc, argv);
    return runner::run_bench(bench_options);
  }
  if (scenario->parsed()) {
    if (scenario_flags.seed_option->count() > 0) {
      scenario_options.seed = scenario_flags.seed;
    }
    if (scenario_flags.campaign_option->count() > 0) {
      scenario_options.campaign = scenario_flags.campaign;
    }
    return runner::run_scenario(scenario_options);
  }
  if (replay->parsed()) {
    return runner::run_replay(replay_options);
  }
  if (conformance->parsed()) {
    return runner::run_conformance_command(conformance_options);
  }
  if (check->parsed()) {
    if (check_options.calbin.empty() && !check_options.list) {
      std::fprintf(stderr, "calrt check: CALBIN is required\n");
      return runner::kExitUsage;
    }
    return runner::run_check(check_options);
  }
  if (inspect->parsed()) {
    return runner::run_inspect(inspect_options);
  }
  if (plan->parsed()) {
    return finish_plan(plan_options, plan_flags) ? runner::run_plan(plan_options)
                                                 : runner::kExitUsage;
  }
  return runner::run_info(info_options);
}
