// Collects the device's own trace (CALRT_EXT_TRACE) during `calrt bench --trace`. The
// device keeps a bounded buffer, so the bench drains it after every job it waited for;
// events lost to the bound anyway are counted and reported, never silently missing.
//
// What the bench keeps is bounded too, so that tracing a long prompt cannot grow the bench
// without limit: at most `max_events` events (the rest are counted in discarded()), none
// from warm-up runs when they are left out, and with `layers` off the segments of a job are
// folded into one slice per job and track as they are drained: a chip's compute
// from its first segment's start to its last one's end, its D2D reductions likewise, their
// bytes and flops summed. A prompt's trace then grows with its chunks, not its layers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "abi/calrt_ext.hpp"

namespace runner {

class DeviceTraceCollector {
 public:
  // Starts recording (Trace_Enable) when the runtime offers the extension; otherwise the
  // collector stays inactive and unavailable() says why.
  void start(const calrt::Device& device, uint64_t capacity_events);
  struct Keep {
    bool events = true;       // false: keep only the D2D statistics below
    bool layers = true;       // false: one slice per job and track
    uint64_t max_events = 0;  // 0: no bound
  };
  // Every D2D reduction recorded while recording, by its size: what `calrt calibrate` fits
  // the die-to-die link to. Sizes are few (one per reduction tensor and token count), so this
  // stays small however long the bench runs.
  struct D2dSize {
    uint64_t count = 0;
    int64_t sum_ns = 0;
    int64_t min_ns = 0;
    int64_t max_ns = 0;
  };
  const std::map<uint64_t, D2dSize>& d2d_sizes() const { return d2d_sizes_; }
  void set_keep(const Keep& keep) { keep_ = keep; }
  // Whether events drained from now on are kept (false during warm-up runs left out).
  void set_recording(bool recording) { recording_ = recording; }
  bool active() const { return static_cast<bool>(trace_); }
  // Whether start() began a recording (events() then holds what the device recorded).
  bool recorded() const { return recorded_; }
  // Moves what the device recorded so far into events(); a no-op when inactive.
  void drain();
  // Drains, then stops recording.
  void stop();

  const std::vector<calrt::TraceEvent>& events() const { return events_; }
  uint64_t dropped() const { return dropped_; }
  // Events the bench let go past --trace-max-events (warm-up runs and folding not counted).
  uint64_t discarded() const { return discarded_; }
  const std::string& unavailable() const { return unavailable_; }

 private:
  calrt::DeviceTrace trace_;
  std::vector<calrt::TraceEvent> events_;
  std::map<uint64_t, D2dSize> d2d_sizes_;
  uint64_t dropped_ = 0;
  uint64_t discarded_ = 0;
  Keep keep_;
  bool recording_ = true;
  bool recorded_ = false;
  std::string unavailable_;
};

}  // namespace runner
