// calrt: the standalone runner for the CalRT runtime. This file only parses arguments and
// dispatches to a subcommand; each subcommand lives in its own file.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <map>

#include "runner/exit_codes.hpp"
#include "runner/info.hpp"
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
                 "build/simdev/runtime/libcalrt_sim.so), or unix:SOCKET (not built yet)")
      ->capture_default_str();
  app.add_option("--device-kind", *flags.kind, "device kind passed to Device_Create")
      ->check(CLI::IsMember({"sim", "pcie"}))
      ->capture_default_str();
  app.add_option("--device-index", *flags.index, "device index passed to Device_Create")
      ->capture_default_str();
  app.add_option("--device-config", *flags.config,
                 "runtime option string for Device_Create, e.g. \"seed=1;dram_mib=4096\"");
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
  return runner::run_info(info_options);
}
