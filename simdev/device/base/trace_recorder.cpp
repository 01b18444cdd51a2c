#include "simdev/device/base/trace_recorder.hpp"

#include <algorithm>
#include <string>

namespace simdev {

Status TraceRecorder::start(uint64_t capacity) {
  if (capacity > kMaxCapacity) {
    return fail(CALRT_INVALID_ARGUMENT, "trace capacity_events " + std::to_string(capacity) +
                                            " exceeds the limit " + std::to_string(kMaxCapacity));
  }
  capacity_ = capacity == 0 ? kDefaultCapacity : capacity;
  records_.clear();
  dropped_ = 0;
  enabled_ = true;
  return {};
}

void TraceRecorder::record(const TraceRecord& record) {
  if (!enabled_) {
    return;
  }
  if (records_.size() >= capacity_) {
    ++dropped_;
    return;
  }
  records_.push_back(record);
}

size_t TraceRecorder::drain(std::span<TraceRecord> out) {
  const size_t count = std::min(out.size(), records_.size());
  std::copy_n(records_.begin(), count, out.begin());
  records_.erase(records_.begin(), records_.begin() + static_cast<std::ptrdiff_t>(count));
  return count;
}

}  // namespace simdev
