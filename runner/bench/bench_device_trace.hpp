// Collects the device's own trace (CALRT_EXT_TRACE) during `calrt bench --trace`. The
// device keeps a bounded buffer, so the bench drains it after every job it waited for;
// events lost to the bound anyway are counted and reported, never silently missing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "abi/calrt_ext.hpp"

namespace runner {

class DeviceTraceCollector {
 public:
  // Starts recording (Trace_Enable) when the runtime offers the extension; otherwise the
  // collector stays inactive and unavailable() says why.
  void start(const calrt::Device& device, uint64_t capacity_events);
  bool active() const { return static_cast<bool>(trace_); }
  // Whether start() began a recording (events() then holds what the device recorded).
  bool recorded() const { return recorded_; }
  // Moves what the device recorded so far into events(); a no-op when inactive.
  void drain();
  // Drains, then stops recording.
  void stop();

  const std::vector<calrt::TraceEvent>& events() const { return events_; }
  uint64_t dropped() const { return dropped_; }
  const std::string& unavailable() const { return unavailable_; }

 private:
  calrt::DeviceTrace trace_;
  std::vector<calrt::TraceEvent> events_;
  uint64_t dropped_ = 0;
  bool recorded_ = false;
  std::string unavailable_;
};

}  // namespace runner
