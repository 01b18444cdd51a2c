#include "runner/scenario/scenario_cli.hpp"

#include "runner/scenario/scenario_options.hpp"

namespace runner {
namespace {

class ScenarioCommand : public Command {
 public:
  explicit ScenarioCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "scenario",
            "deterministic fault-injection scenarios (scenarios/README.md), random fault "
            "campaigns and exhaustive sweeps, under the runner's recovery policy")) {
    CLI::App& app = *app_;
    ScenarioOptions& o = options_;
    app.add_option("FILE", o.files, "scenario files (scenarios/*.yaml)");
    seed_option_ = app.add_option("--seed", seed_,
                                  "override each file's seed; with --campaign, the first "
                                  "plan's seed (default 1)");
    campaign_option_ = app.add_option("--campaign", campaign_,
                                      "run N random fault plans (seeds S, S+1, ...) over the "
                                      "built-in workload");
    app.add_flag("--sweep", o.sweep,
                 "sweep every FILE: each fault kind, transient and persistent, at the 1st, "
                 "2nd, ... eligible device operation");
    app.add_option("--calbin-dir", o.calbin_dir,
                   "calbins by preset name, DIR/<preset>; a missing one is generated there")
        ->capture_default_str();
    app.add_option("--device", o.device,
                   "sim (the simulator in process), a runtime library path (e.g. "
                   "build/simdev/runtime/libcalrt_sim.so), or unix:SOCKET / tcp:HOST:PORT (a "
                   "`simdev serve` daemon); it must offer the fault extension")
        ->capture_default_str();
    app.add_option("--json", o.json, "write the JSON report (calrt-scenario/1) to this file")
        ->check(output_path());
    app.add_flag("!--quiet", o.progress, "no progress line on a terminal");
    app.add_option("--junit", o.junit,
                   "write a JUnit XML report to this file: one testcase per scenario, plan or "
                   "sweep, failures with the command that replays them")
        ->check(output_path());
    app.add_option("--md", o.md,
                   "write markdown tables (scenarios and sweeps; a campaign's failed plans) for "
                   "pasting into a review")
        ->check(output_path());
    app.add_option("--jsonl", o.jsonl,
                   "stream one JSON line per scenario, plan or sweep as it finishes, then a "
                   "summary line; `-` for stdout (the human lines then go to stderr)")
        ->check(output_path());
    add_shard_option(app, o.shard, "campaign plans (or scenario FILEs)");
    app.add_flag("--coverage", o.coverage,
                 "after the run, print the fault hits per (kind, site) summed over every run");
    app.add_option("--policy-bug", o.policy_bug,
                   "TEST ONLY: make the recovery policy wrong in one way (no-reset, "
                   "no-timeout, single-level, no-reload, no-replay, lost-as-request, "
                   "skip-output-check, reset-on-degraded, reset-request-faults) to prove a "
                   "scenario catches it")
        ->check(CLI::IsMember({"none", "no-reset", "no-timeout", "single-level", "no-reload",
                               "no-replay", "lost-as-request", "skip-output-check",
                               "reset-on-degraded", "reset-request-faults"}))
        ->group("Test-only options");
    app.footer(
        "Exit codes: 0 every scenario, plan or sweep passed; 1 one failed (a FAIL line with "
        "the command that replays it); 2 bad input found before anything ran (a scenario "
        "file's field, a missing calbin, a device option or fault plan the runtime refuses).");
  }

  int run(int /*argc*/, char** /*argv*/) override {
    // --seed and --campaign only count when given; CLI11 fills plain values.
    if (seed_option_->count() > 0) options_.seed = seed_;
    if (campaign_option_->count() > 0) options_.campaign = campaign_;
    return run_scenario(options_);
  }

 private:
  ScenarioOptions options_;
  uint64_t seed_ = 1;
  uint32_t campaign_ = 0;
  CLI::Option* seed_option_ = nullptr;
  CLI::Option* campaign_option_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> add_scenario_command(CLI::App& calrt) {
  return std::make_unique<ScenarioCommand>(calrt);
}

}  // namespace runner
