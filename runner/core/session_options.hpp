// Options of a run against golden data: `calrt smoke` (stage 9, the standalone device smoke)
// and the commands that reuse its session (bench, conformance, scenario).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace runner {

// Deliberate defects for negative tests of the smoke itself: each must make it fail with
// a diagnosis that points at the cause. Never use outside tests.
enum class RunnerBug {
  none,
  past_kv,   // decode sets past_kv_cur_seq_len one too high
  position,  // decode feeds positions one too high
  stale_kv,  // after prefill, decode runs on a freshly allocated KV instead of the filled one
  tile16,    // the logits are read as if the output tile were 16, whatever the calbin says
};
const char* to_string(RunnerBug bug);

// The numeric gates. Each is calibrated on the unmodified simulator over weight seeds 1-64
// and on the numeric mutants (runner/README.md, "Calibration of the numeric gates", and
// scripts/calibrate-gates.py, which reproduces the data).
struct Thresholds {
  // Per comparison (every prefill and teacher-forced decode row against golden).
  double min_cosine = 0.9995;
  double max_abs_error = 0.5;  // at the golden top-k ids
  // Ranks near the tail of the top 20 trade places under W8A8 noise; 0.8 keeps two swaps of
  // margin while a wrong position or KV still empties the overlap.
  double min_top_k_overlap = 0.8;
  // Over the run: systematic errors that the per-row noise hides.
  double max_gain_bias = 0.001;      // |mean least-squares gain - 1| over every comparison
  double max_mean_rel_rms = 0.0155;  // mean relative RMS error of each phase
  // Greedy: a disagreement counts only where the golden's top-1 margin exceeds tie_margin.
  double tie_margin = 0.3;
  double min_greedy = 0.95;               // teacher-forced agreement over decisive rows
  std::optional<double> min_free_greedy;  // free-running agreed-prefix rate, gated when set
  // With a contract reference in the golden set, every gate above but the tie margin opens to
  // the reference's own distance from FP32 (scaled_by_reference in golden_compare.hpp): the
  // defaults are the presets' calibration, the reference is the shape's.
  bool scale_fp32_gates = true;
  // Set from the manifest for a mixture of experts (llm.experts > 0). Its W8A8 numerics pick
  // other experts than FP32 for a few tokens, a discrete decision that moves those rows far
  // from FP32 by itself; so the per-row gates (cosine, max abs error, top-k overlap) open to
  // the reference's distance without their ceilings. The run means keep theirs.
  bool routed_model = false;
  // Without a contract reference (a vendor calbin, --contract none) a correct device's
  // distance from an FP32 golden depends on the model at depth, so the distribution gates
  // (cosine, max abs error, relative RMS, gain) are reported, and gated only against a
  // baseline (core/baseline.hpp) or an explicit threshold; the rank gates carry the verdict
  // with the no-contract defaults below (runner/README.md, "Without a contract reference").
  bool distribution_gated = true;
  // Against the device-contract reference, per row: the largest error in BF16 ULPs of the
  // row's range. calbin/MODEL.md fixes the order of every reduction, so a correct device
  // equals the contract bit for bit and any difference is a defect (runner/README.md,
  // "Calibration of the numeric gates"). A device built on another C library may differ by
  // the last bit of an expf; --max-contract-ulps opens the gate for it, saying so.
  double max_contract_ulps = 0.0;
  // Over the run: the mean error in those ULPs. Not gated unless given: the per-row gate
  // already holds every row to its limit.
  std::optional<double> max_contract_mean_ulps;
};

// The rank gates' defaults without a contract reference, calibrated at depth 24 to 48 on
// Gaussian and trained-like weights (runner/README.md, "Without a contract reference").
inline constexpr double kNoContractMinGreedy = 0.8;
inline constexpr double kNoContractMinTopK = 0.5;

struct SmokeOptions {
  std::filesystem::path calbin;
  std::string device = "sim";  // "sim", a runtime library path, or "unix:SOCKET"
  std::string device_kind = "sim";
  uint32_t device_index = 0;
  std::string device_config;
  std::optional<std::filesystem::path> golden;  // default: the manifest's golden index
  std::string cases = "short";                  // "short", "all" or "NAME,NAME"
  std::string prefill_model;                    // exact name; default: the unique prefill model
  std::string decode_model;                     // exact name; default: the unique decode model
  std::optional<std::filesystem::path> json;
  std::optional<std::filesystem::path> junit;  // JUnit XML: one testcase per step
  Thresholds thresholds;
  uint32_t timeout_ms = 30000;  // per device call that waits (device time for the simulator)
  RunnerBug bug = RunnerBug::none;
  bool progress = true;  // a progress line over the golden cases on a terminal (--quiet: none)
  // Calbins configured on the device before this one and kept configured throughout (the
  // reference's multi-model residency): this calbin must fit next to them and run as usual.
  std::vector<std::filesystem::path> resident;
  // Where the device-contract reference comes from (core/golden_contract.hpp): "auto" (the
  // golden set's rows, else computed from the calbin's weights when it has them), "golden",
  // "computed" (always from the calbin, whatever the golden holds) or "none" (the FP32
  // golden alone, as for a vendor calbin).
  std::string contract = "auto";
  // A known-good run's JSON report on the same golden (core/baseline.hpp): every FP32 metric
  // must be no worse than the baseline's by more than the calibrated margin.
  std::optional<std::filesystem::path> baseline;
  // Which gates the command line set: an explicit threshold is kept as given.
  bool distribution_explicit = false;  // --min-cosine, --max-abs-error, --max-gain-bias, ...
  bool rank_explicit = false;          // --min-greedy, --min-topk-overlap
};

}  // namespace runner
