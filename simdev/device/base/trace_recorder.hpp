// What the device did, on its own clock, for timelines (the ABI's trace extension). The
// recording is bounded: past its capacity events are counted as dropped, never allocated,
// so a forgotten recording cannot grow without limit.
#pragma once

#include <cstdint>
#include <deque>
#include <span>

#include "abi/calrt_ext.h"
#include "simdev/device/base/sim_time.hpp"
#include "simdev/device/base/status.hpp"

namespace simdev {

struct TraceRecord {
  CalrtTraceTrack track = CALRT_TRACK_CHIP;
  CalrtTraceKind kind = CALRT_TRACE_COMPUTE;
  uint32_t chip = 0;
  int32_t layer = -1;
  uint64_t job_serial = 0;
  TimePs begin_ps = 0;
  TimePs end_ps = 0;
  uint64_t bytes = 0;
  uint64_t flops = 0;
  const char* label = "";  // static storage
};

class TraceRecorder {
 public:
  static constexpr uint64_t kDefaultCapacity = uint64_t{1} << 18;
  static constexpr uint64_t kMaxCapacity = uint64_t{1} << 24;

  // Starts afresh (capacity 0: the default); INVALID_ARGUMENT above kMaxCapacity.
  Status start(uint64_t capacity);
  void stop() { enabled_ = false; }
  bool enabled() const { return enabled_; }

  void record(const TraceRecord& record);
  // Moves up to out.size() records, oldest first; returns how many.
  size_t drain(std::span<TraceRecord> out);
  uint64_t dropped() const { return dropped_; }

 private:
  bool enabled_ = false;
  uint64_t capacity_ = kDefaultCapacity;
  uint64_t dropped_ = 0;
  std::deque<TraceRecord> records_;
};

}  // namespace simdev
