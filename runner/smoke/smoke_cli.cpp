#include "runner/smoke/smoke_cli.hpp"

#include "runner/smoke/smoke.hpp"

namespace runner {
namespace {

RunnerBug parse_bug(const std::string& text) {
  if (text == "past-kv") return RunnerBug::past_kv;
  if (text == "position") return RunnerBug::position;
  if (text == "tile16") return RunnerBug::tile16;
  return text == "stale-kv" ? RunnerBug::stale_kv : RunnerBug::none;
}

class SmokeCommand : public Command {
 public:
  explicit SmokeCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "smoke",
            "stage 9 device smoke: device, calbin, configure, buffers, prefill and decode "
            "against golden, KV checks")) {
    CLI::App& app = *app_;
    SmokeOptions& o = options_;
    app.add_option("CALBIN", o.calbin, "calbin directory")->required();
    add_device_options(app, {&o.device, &o.device_kind, &o.device_index, &o.device_config});
    app.add_option("--golden", o.golden, "golden directory (default: the calbin's golden index)");
    app.add_option("--resident", o.resident,
                   "a calbin configured on the device first and kept configured throughout "
                   "(multi-model residency: this calbin must fit next to it); repeatable");
    app.add_option("--cases", o.cases, "short, all (adds the long cases) or NAME,NAME")
        ->capture_default_str();
    app.add_option("--prefill-model", o.prefill_model,
                   "exact prefill model name (default: the calbin's only prefill model)");
    app.add_option("--decode-model", o.decode_model,
                   "exact decode model name (default: the calbin's only decode model)");
    app.add_option("--json", o.json, "write the JSON report to this file (atomically)")
        ->check(output_path());
    app.add_flag("!--quiet", o.progress, "no progress line on a terminal");
    app.add_option("--junit", o.junit,
                   "write a JUnit XML report (one testcase per step) to this file (atomically)")
        ->check(output_path());
    app.add_option("--min-cosine", o.thresholds.min_cosine, "minimum logits cosine")
        ->check(finite_range(-1.0, 1.0))
        ->capture_default_str();
    app.add_option("--max-abs-error", o.thresholds.max_abs_error,
                   "maximum abs logits error at the golden top ids, per row")
        ->check(finite_range(0.0, 1e6))
        ->capture_default_str();
    app.add_option("--max-gain-bias", o.thresholds.max_gain_bias,
                   "maximum |mean least-squares gain - 1| of the logits over the run")
        ->check(finite_range(0.0, 1e6))
        ->capture_default_str();
    app.add_option("--max-mean-rel-rms", o.thresholds.max_mean_rel_rms,
                   "maximum mean relative RMS logits error of each phase")
        ->check(finite_range(0.0, 1e6))
        ->capture_default_str();
    app.add_flag("!--fixed-fp32-gates", o.thresholds.scale_fp32_gates,
                 "keep the FP32 gates at their thresholds even where the golden set's contract "
                 "reference is further from FP32 (by default they open to it: the thresholds "
                 "are calibrated on the presets' shapes)");
    app.add_option("--tie-margin", o.thresholds.tie_margin,
                   "golden top-1 margin below which a greedy disagreement is a near-tie, not "
                   "a miss")
        ->check(finite_range(0.0, 1e6))
        ->capture_default_str();
    app.add_option("--contract", o.contract,
                   "the device-contract reference: auto (the golden's rows, else computed from "
                   "the calbin's weights), golden, computed, or none (the FP32 golden alone)")
        ->check(CLI::IsMember({"auto", "golden", "computed", "none"}))
        ->capture_default_str();
    app.add_option("--baseline", o.baseline,
                   "a known-good run's --json report on the same golden set: every FP32 metric "
                   "must be no worse than the baseline's by more than the calibrated margin")
        ->check(CLI::ExistingFile);
    app.add_option("--max-contract-ulps", o.thresholds.max_contract_ulps,
                   "maximum error against the device-contract reference, in BF16 ULPs of "
                   "each row's largest logit")
        ->check(finite_range(0.0, 1e6))
        ->capture_default_str();
    contract_mean_ =
        app.add_option("--max-contract-mean-ulps", o.thresholds.max_contract_mean_ulps.emplace(),
                       "maximum mean error against the device-contract reference "
                       "over the run, in the same ULPs (default: not gated; the per-row "
                       "gate holds every row)")
            ->check(finite_range(0.0, 1e6));
    app.add_option("--min-topk-overlap", o.thresholds.min_top_k_overlap, "minimum top-k overlap")
        ->check(finite_range(0.0, 1.0))
        ->capture_default_str();
    app.add_option("--min-greedy", o.thresholds.min_greedy,
                   "minimum teacher-forced greedy agreement rate")
        ->check(finite_range(0.0, 1.0))
        ->capture_default_str();
    min_free_ = app.add_option("--min-free-greedy", o.thresholds.min_free_greedy.emplace(),
                               "minimum free-running agreed-prefix rate (default: reported, "
                               "not gated)")
                    ->check(finite_range(0.0, 1.0));
    app.add_option("--timeout-ms", o.timeout_ms,
                   "bound of every device wait (device time for the simulator)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--inject-runner-bug", bug_,
                   "TEST ONLY: make the runner itself wrong (past-kv, position, stale-kv or "
                   "tile16) to prove the smoke catches and diagnoses it")
        ->check(CLI::IsMember({"past-kv", "position", "stale-kv", "tile16"}))
        ->group("Test-only options");
    app.footer(kDeviceExitCodes);
  }

  int run(int /*argc*/, char** /*argv*/) override {
    // The optional gates only count when given; CLI11 filled the emplaced values.
    if (min_free_->count() == 0) options_.thresholds.min_free_greedy.reset();
    if (contract_mean_->count() == 0) options_.thresholds.max_contract_mean_ulps.reset();
    options_.bug = parse_bug(bug_);
    for (const char* name :
         {"--min-cosine", "--max-abs-error", "--max-gain-bias", "--max-mean-rel-rms"}) {
      options_.distribution_explicit |= app_->count(name) > 0;
    }
    for (const char* name : {"--min-greedy", "--min-topk-overlap"}) {
      options_.rank_explicit |= app_->count(name) > 0;
    }
    return run_smoke(options_);
  }

 private:
  SmokeOptions options_;
  std::string bug_;
  CLI::Option* min_free_ = nullptr;
  CLI::Option* contract_mean_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> add_smoke_command(CLI::App& calrt) {
  return std::make_unique<SmokeCommand>(calrt);
}

}  // namespace runner
