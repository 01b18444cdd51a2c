// The timeline of `calrt bench --trace FILE` as Chrome trace event JSON (chrome_trace.hpp),
// loadable in Perfetto or chrome://tracing. Everything is on the device clock.
//
//   process "device": one track per chip ("chip 0", "chip 1", ...) with the compute
//     segments of every job (name: the segment's label, e.g. "attention"), then "PCIe H2D"
//     and "PCIe D2H" (DMA), "D2D" (the tensor-parallel reductions) and "queue" (a job from
//     submission until its input DMA starts): what the device's trace extension recorded.
//   process "host": track "host" with the host's phases (prepare; rank for greedy, or
//     bf16->fp32 and sample for top-k; wait: blocked in Job_Wait), placed at the device time when
//     the host performed them, as charged with Clock_HostSpend; track "runs" with one span per run.
// Sync and parallel mode run one after the other on the same device, so they follow each
// other on one timeline. Each event's args say which job it belongs to: "job" is the
// device's job serial (as in the device's own messages), "submission" the bench's count of
// submissions, plus mode, run, request, model, chunk or step and slot, and layer, bytes and
// flops where the device knows them. Device serials are matched to submissions by time,
// not assumed equal (bench_trace.cpp says why).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "abi/calrt_ext.hpp"
#include "runner/bench/bench_records.hpp"

namespace runner {

struct BenchTraceCounts {
  size_t device_events = 0;
  size_t host_events = 0;
  size_t unmatched_job_serials = 0;  // device jobs that match no submission of the bench
};

// `warmup` false: the host spans and run spans of warm-up runs are left out (their device
// events were not collected).
std::string bench_chrome_trace(const std::vector<calrt::TraceEvent>& device_events,
                               const std::vector<ModeRecord>& modes, uint32_t chip_count,
                               bool warmup = true, BenchTraceCounts* counts = nullptr);

}  // namespace runner
