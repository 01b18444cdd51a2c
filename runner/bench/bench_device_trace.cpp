#include "runner/bench/bench_device_trace.hpp"

#include <iterator>

namespace runner {

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
  events_.insert(events_.end(), std::make_move_iterator(batch.begin()),
                 std::make_move_iterator(batch.end()));
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
