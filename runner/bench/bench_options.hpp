// Options of `calrt bench`: fixed prompt and generation lengths, runs,
// concurrency, sync and/or parallel mode, sampling, how host work is timed, and the reports.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "runner/core/report/shard.hpp"
#include "runner/core/sampling.hpp"

namespace runner {

enum class BenchModes { sync, parallel, both };
const char* to_string(BenchModes modes);

// How the host phases (input preparation, BF16->FP32 conversion, sampling) are timed and
// charged to the device clock (Clock_HostSpend).
//   wall:  measured with the host's steady clock; real, but varies between runs.
//   model: overhead_ns + bytes touched / gbps (see bench_host_time.hpp for the bytes of
//          each phase); the whole report and trace become a pure function of the inputs.
enum class HostTimeMode { wall, model };
const char* to_string(HostTimeMode mode);

struct HostTimeModel {
  double gbps = 10.0;           // host memory bandwidth in GB/s (10^9 bytes per second)
  uint64_t overhead_ns = 1000;  // fixed cost of every host phase
};

struct BenchOptions {
  std::filesystem::path calbin;
  std::string device = "sim";  // "sim", a runtime library path, or "unix:SOCKET"
  std::string device_kind = "sim";
  uint32_t device_index = 0;
  std::string device_config;
  std::string prefill_model;  // exact name; default: the calbin's unique prefill model
  std::string decode_model;   // exact name; default: the calbin's unique decode model

  uint32_t prompt_len = 128;  // prompt tokens of every request
  uint32_t gen_len = 32;      // tokens generated per request: 1 from prefill, gen_len-1 decodes
  uint32_t runs = 3;          // measured runs per mode
  uint32_t warmup = 1;        // unmeasured runs per mode before them
  uint32_t concurrency = 1;   // requests in flight per run, each with its own KV handle
  BenchModes modes = BenchModes::both;
  SamplingConfig sampling;
  uint64_t seed = 1;  // prompt token ids
  HostTimeMode host_time = HostTimeMode::wall;
  HostTimeModel host_model;

  std::filesystem::path json;   // empty: no JSON report
  std::filesystem::path csv;    // empty: no CSV report
  std::filesystem::path trace;  // empty: no Chrome trace
  std::filesystem::path md;     // empty: no markdown table
  std::filesystem::path jsonl;  // one line per measured run (a sweep: per point); "-": stdout
  uint64_t trace_capacity = 0;  // device trace buffer in events; 0: the runtime's default
  bool trace_warmup = true;     // --trace-runs all (true) or measured
  bool trace_layers = true;     // --trace-level layer (true) or job
  uint64_t trace_max_events = 500000;  // device events the bench keeps (about 1.5 KB each)
  // Record every D2D reduction's size and time from the device trace into the JSON report
  // (`d2d_spans`, for calrt calibrate); --trace does it too.
  bool d2d_spans = false;
  uint32_t timeout_ms = 30000;  // bound of every device wait (device time for the simulator)

  // Design-space sweep (bench_sweep.hpp): one or two device-config keys, each with its values;
  // every point of their product is a whole bench run.
  struct SweepAxis {
    std::string key;
    std::vector<std::string> values;
  };
  std::vector<SweepAxis> sweep;
  std::optional<Shard> shard;  // a sweep's points k with k mod N = I
  bool table = true;           // the header line, table and verdict line (a sweep prints its own)
  bool progress = true;        // a progress line on a terminal (--quiet: none)
};

}  // namespace runner
