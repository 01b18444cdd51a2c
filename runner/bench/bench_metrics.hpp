// The figures of `calrt bench`, computed from the records of one mode (measured runs only,
// never the warmup). Every figure is a distribution (count, min, P50, P90, P99, max, mean;
// percentiles by nearest rank, percentiles.hpp) labelled with the clock it was read on:
//   device       the device clock: Job_Status timestamps and Clock_Get, virtual time on the
//                simulator; host work enters it only as charged through Clock_HostSpend
//   host-wall    the host's steady clock (--host-time wall)
//   host-model   the host-time model (--host-time model, bench_host_time.hpp)
// The definitions live in bench_metrics.cpp, one sentence each, and go into the report.
#pragma once

#include <string>
#include <vector>

#include "runner/bench/bench_options.hpp"
#include "runner/bench/bench_records.hpp"
#include "runner/bench/percentiles.hpp"

namespace runner {

struct MetricSpec {
  const char* name;
  bool device_clock;  // false: the host clock of --host-time
  const char* unit;   // "ms", "us" or "tok/s"
  const char* definition;
};
// Every metric, in report order.
const std::vector<MetricSpec>& bench_metric_specs();

struct MetricRow {
  std::string name;
  std::string clock;  // "device", "host-wall" or "host-model"
  std::string unit;
  Distribution dist;
  std::string unavailable;  // why there are no samples; empty when count > 0
};

// One row per metric of bench_metric_specs(), in that order.
std::vector<MetricRow> compute_metrics(const ModeRecord& mode, const BenchOptions& options,
                                       const std::string& host_clock);

// The row named `name`, or nullptr.
const MetricRow* find_metric(const std::vector<MetricRow>& rows, const std::string& name);

}  // namespace runner
