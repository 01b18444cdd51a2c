#include "runner/calibrate/calibrate_cli.hpp"

#include "runner/calibrate/calibrate.hpp"

namespace runner {
namespace {

class CalibrateCommand : public Command {
 public:
  explicit CalibrateCommand(CLI::App& calrt)
      : Command(calrt.add_subcommand(
            "calibrate", "fit the simulator's timing constants to bench reports of a device")) {
    CLI::App& app = *app_;
    CalibrateOptions& o = options_;
    app.add_option("CALBIN", o.calbin, "the calbin the reports measured")->required();
    app.add_option("REPORT", o.reports,
                   "calrt bench --json reports of this calbin (calrt-bench/3, or a sweep's "
                   "calrt-bench-sweep/4): several prompt lengths, sync mode, with --d2d-spans "
                   "for the die-to-die link")
        ->required();
    app.add_option("--device-config", o.device_config,
                   "the card's peak rates and the fit's starting point (key=value;...; "
                   "config=FILE); default: the simulator's defaults");
    app.add_option("--out", o.out,
                   "write the calibrated device config (YAML, fitted keys tagged measured) "
                   "atomically")
        ->check(output_path());
    app.add_option("--json", o.json, "write the calrt-calibrate/1 report atomically")
        ->check(output_path());
    app.footer(
        "Fitted: submit_overhead_ns (sync-mode queue), pcie_latency_ns and pcie_efficiency_pct "
        "(H2D and D2H against their bytes), d2d_latency_ns and d2d_bw_mbps (D2D spans), "
        "compute_efficiency_pct, dram_efficiency_pct and op_overhead_ns (infer time per job "
        "shape). Peak rates come from --device-config. A key the reports cannot fix keeps its "
        "base value, with the reason.\n"
        "Exit codes: 0 the fit ran (its error per phase is reported, not judged); 2 usage or "
        "bad input (a report that is not a passing bench report of this calbin and one "
        "device config, a malformed field, an unwritable output).");
  }

  int run(int /*argc*/, char** /*argv*/) override { return run_calibrate(options_); }

 private:
  CalibrateOptions options_;
};

}  // namespace

std::unique_ptr<Command> add_calibrate_command(CLI::App& calrt) {
  return std::make_unique<CalibrateCommand>(calrt);
}

}  // namespace runner
