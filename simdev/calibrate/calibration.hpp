// Fits the timing model's constants (simdev/device/README.md, "Timing") to measured job
// phases: what `calrt calibrate` does with bench reports of a real device. The model that is
// fitted is the simulator's own cost model (CostPlan), so a calibrated config makes the
// simulator predict the device it was measured on, with the fit error stated per phase.
//
// Each constant is fitted from the phase that isolates it, in this order, each later step
// holding the earlier ones:
//   submit_overhead_ns                  the queue phase of sync-mode jobs (nothing ahead of
//                                       them): its median
//   pcie_latency_ns, pcie_efficiency_pct  H2D and D2H time against their bytes: a weighted
//                                       least-squares line, latency + bytes / rate
//   d2d_latency_ns, d2d_bw_mbps         the D2D reductions of the device trace, the same line
//   compute_efficiency_pct, dram_efficiency_pct, op_overhead_ns
//                                       infer time of every (kind, tokens, past) shape: the
//                                       two efficiencies by a pattern search over whole
//                                       percents, the op overhead, which adds linearly, by
//                                       least squares at each point of the search
// Peak rates (cores, clock, MACs, DRAM bandwidth, PCIe generation and lanes) are not fitted:
// only their product with an efficiency shows in a time, so they are taken from the base
// config as the card's data sheet gives them, and the efficiency absorbs the rest. A
// constant the data cannot move (no job is compute-bound, one transfer size only) keeps its
// base value and says why. Errors are relative, so a 2 us transfer weighs as much as a 2 ms
// one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/device/base/status.hpp"
#include "simdev/device/timing/device_config.hpp"

namespace simdev {

// One measured job shape: the medians of the jobs of that shape. A phase below zero was not
// measured (the runtime did not report it).
struct JobTiming {
  bool prefill = true;
  uint64_t tokens = 1;  // cur_seq_len
  uint64_t past = 0;    // past_kv_cur_seq_len
  uint64_t count = 1;   // jobs behind the medians
  double queue_ns = -1;
  double h2d_ns = -1;
  double infer_ns = -1;
  double d2h_ns = -1;
};

// D2D reductions of one size, from the device trace.
struct TransferTiming {
  uint64_t bytes = 0;
  uint64_t count = 1;
  double ns = 0;  // mean
};

struct CalibrationInput {
  const calbin::Manifest* manifest = nullptr;
  const calbin::Model* prefill = nullptr;
  const calbin::Model* decode = nullptr;
  DeviceConfig base;  // the card's peak rates, and the starting point of the fit
  std::vector<JobTiming> jobs;
  std::vector<TransferTiming> d2d;  // empty: the reports carry no D2D spans
};

struct FittedKey {
  std::string_view name;
  uint64_t base = 0;
  uint64_t value = 0;
  bool measured = false;  // false: the data could not fix it; `note` says why
  std::string note;
  // The compute and DRAM efficiencies: the values that fit the data within a 95 % profile
  // confidence region (calibration.cpp, range_of).
  std::optional<std::pair<uint64_t, uint64_t>> range;
};

// How well a config predicts one phase: mean and worst absolute percentage error over the
// measured shapes (each shape once, whatever its job count).
struct PhaseError {
  std::string phase;  // "queue", "h2d", "d2h", "infer prefill", "infer decode", "d2d"
  size_t shapes = 0;
  double mape_pct = 0;
  double worst_pct = 0;
};

struct Calibration {
  DeviceConfig config;
  std::vector<FittedKey> keys;
  std::vector<PhaseError> before;  // the base config's error
  std::vector<PhaseError> after;   // the fitted config's error
};

// INVALID_ARGUMENT when the input has no infer time to fit or a model is missing.
Expected<Calibration> calibrate(const CalibrationInput& input);

// What the calibrated config predicts for each phase, under `config`; the same figures the
// fit minimises, exposed for the report and the tests.
std::vector<PhaseError> phase_errors(const CalibrationInput& input, const DeviceConfig& config);

}  // namespace simdev
