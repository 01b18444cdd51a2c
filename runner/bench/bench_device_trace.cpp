#include "runner/bench/bench_device_trace.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace runner {
namespace {

// One slice per (job, track, chip, kind) for the compute segments and D2D reductions of a
// batch (per layer, plus the embedding and head); queue and DMA events pass as they are. A drain
// holds whole jobs (the bench drains after each wait), so a job is never split between two folds.
std::vector<calrt::TraceEvent> fold_layers(std::vector<calrt::TraceEvent> batch) {
  std::vector<calrt::TraceEvent> out;
  std::map<std::tuple<uint64_t, int, uint32_t, int>, size_t> slice_of;
  std::vector<uint64_t> folded;  // per event of `out`: how many were folded into it (0: none)
  for (calrt::TraceEvent& event : batch) {
    if (event.kind != calrt::TraceKind::compute && event.kind != calrt::TraceKind::d2d) {
      out.push_back(std::move(event));  // one per job already
      folded.push_back(0);
      continue;
    }
    const auto key = std::make_tuple(event.job_serial, static_cast<int>(event.track), event.chip,
                                     static_cast<int>(event.kind));
    const auto [at, inserted] = slice_of.emplace(key, out.size());
    if (inserted) {
      event.layer = -1;
      out.push_back(std::move(event));
      folded.push_back(1);
      continue;
    }
    calrt::TraceEvent& slice = out[at->second];
    slice.begin = std::min(slice.begin, event.begin);
    slice.end = std::max(slice.end, event.end);
    slice.bytes += event.bytes;
    slice.flops += event.flops;
    ++folded[at->second];
  }
  for (size_t index = 0; index < out.size(); ++index) {
    const uint64_t count = folded[index];
    if (count == 0) continue;
    out[index].label = out[index].kind == calrt::TraceKind::compute
                           ? fmt::format("{} segments", count)
                           : fmt::format("x{}", count);
  }
  return out;
}

}  // namespace

void DeviceTraceCollector::start(const calrt::Device& device, uint64_t capacity_events) {
  calrt::DeviceTrace trace = calrt::DeviceTrace::of(device);
  if (!trace) {
    unavailable_ = "the runtime has no trace extension (CALRT_EXT_TRACE): device tracks are empty";
    return;
  }
  trace.start(capacity_events);
  trace_ = trace;
  recorded_ = true;
}

void DeviceTraceCollector::drain() {
  if (!trace_) {
    return;
  }
  uint64_t dropped = 0;
  std::vector<calrt::TraceEvent> batch = trace_.drain(&dropped);
  dropped_ = dropped;  // the device counts since recording started
  if (!recording_) {
    return;
  }
  for (const calrt::TraceEvent& event : batch) {
    if (event.kind != calrt::TraceKind::d2d) continue;
    const int64_t ns = (event.end - event.begin).count();
    D2dSize& size = d2d_sizes_[event.bytes];
    size.min_ns = size.count == 0 ? ns : std::min(size.min_ns, ns);
    size.max_ns = size.count == 0 ? ns : std::max(size.max_ns, ns);
    size.sum_ns += ns;
    ++size.count;
  }
  if (!keep_.events) {
    return;
  }
  if (!keep_.layers) {
    batch = fold_layers(std::move(batch));
  }
  for (calrt::TraceEvent& event : batch) {
    if (keep_.max_events != 0 && events_.size() >= keep_.max_events) {
      ++discarded_;
      continue;
    }
    events_.push_back(std::move(event));
  }
}

void DeviceTraceCollector::stop() {
  if (!trace_) {
    return;
  }
  drain();
  trace_.stop();
  trace_ = calrt::DeviceTrace();
}

}  // namespace runner
