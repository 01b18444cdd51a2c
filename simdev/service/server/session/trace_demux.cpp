#include "simdev/service/server/session/trace_demux.hpp"

#include <algorithm>
#include <string>

namespace simdev::service::server {
namespace {

// Events moved from the device per Trace_Read call while draining it.
constexpr size_t kDrainChunk = size_t{1} << 14;

}  // namespace

void TraceDemux::device_created() {
  queues_.clear();
  owners_.clear();
  next_serial_ = 1;
  device_recording_ = false;
  device_capacity_ = 0;
  device_dropped_ = 0;
}

void TraceDemux::job_submitted(uint64_t session) {
  const uint64_t serial = next_serial_++;
  if (device_recording_) owners_[serial] = session;
}

bool TraceDemux::any_recording() const {
  return std::any_of(queues_.begin(), queues_.end(),
                     [](const auto& q) { return q.second.recording; });
}

void TraceDemux::deliver(Queue& queue, const CalrtTraceEvent& event) {
  if (queue.events.size() >= queue.capacity) {
    ++queue.dropped;
    return;
  }
  queue.events.push_back(event);
}

Failure TraceDemux::drain(const Device& d) {
  if (!device_recording_) return {};
  std::vector<CalrtTraceEvent> chunk(kDrainChunk);
  while (true) {
    auto args = make_args<Calrt_Trace_Read_Args>();
    args.device = d.device;
    args.events = chunk.data();
    args.event_struct_size = sizeof(CalrtTraceEvent);
    args.capacity = chunk.size();
    Failure f = take_error(d.api, d.ext->Trace_Read(&args));
    if (!f.ok()) return f;
    // Lost on the device: whose they were is unknown, so every recording session counts them.
    const uint64_t lost = args.dropped - std::min(args.dropped, device_dropped_);
    device_dropped_ = args.dropped;
    for (auto& [session, queue] : queues_) {
      if (queue.recording) queue.dropped += lost;
    }
    const size_t count = std::min(args.count, chunk.size());
    for (size_t i = 0; i < count; ++i) {
      const CalrtTraceEvent& event = chunk[i];
      if (event.job_serial == 0) {
        for (auto& [session, queue] : queues_) {
          if (queue.recording) deliver(queue, event);
        }
        continue;
      }
      const auto owner = owners_.find(event.job_serial);
      if (owner == owners_.end()) continue;  // a job of no recording session
      const auto queue = queues_.find(owner->second);
      if (queue != queues_.end() && queue->second.recording) deliver(queue->second, event);
    }
    if (count < chunk.size()) return {};
  }
}

Failure TraceDemux::stop_device(const Device& d) {
  if (!device_recording_) return {};
  Failure drained = drain(d);
  auto args = make_args<Calrt_Trace_Enable_Args>();
  args.device = d.device;
  args.enable = 0;
  Failure f = take_error(d.api, d.ext->Trace_Enable(&args));
  device_recording_ = false;
  device_capacity_ = 0;
  owners_.clear();
  return drained.ok() ? f : drained;
}

Failure TraceDemux::enable(const Device& d, uint64_t session, bool on, uint64_t capacity) {
  if (!on) {
    const auto queue = queues_.find(session);
    if (queue == queues_.end() || !queue->second.recording) return {};
    // What the device holds of this session's jobs is its own until it reads it.
    Failure drained = drain(d);
    queue->second.recording = false;
    if (!any_recording()) {
      Failure stopped = stop_device(d);
      if (!stopped.ok()) return stopped;
    }
    return drained;
  }
  if (capacity > kMaxSessionEvents) {
    return {CALRT_INVALID_ARGUMENT,
            "Trace_Enable: field 'capacity_events': " + std::to_string(capacity) +
                " exceeds the daemon's per-session limit " + std::to_string(kMaxSessionEvents)};
  }
  const uint64_t wanted = capacity == 0 ? (uint64_t{1} << 18) : capacity;
  // The others' pending events are theirs: moved out before the device restarts.
  if (Failure drained = drain(d); !drained.ok()) return drained;
  if (!device_recording_ || device_capacity_ < wanted) {
    auto args = make_args<Calrt_Trace_Enable_Args>();
    args.device = d.device;
    args.enable = 1;
    args.capacity_events = std::max(wanted, device_capacity_);
    if (Failure f = take_error(d.api, d.ext->Trace_Enable(&args)); !f.ok()) return f;
    device_recording_ = true;
    device_capacity_ = args.capacity_events;
    device_dropped_ = 0;
  }
  Queue& queue = queues_[session];
  queue = Queue{};
  queue.recording = true;
  queue.capacity = wanted;
  return {};
}

Failure TraceDemux::read(const Device& d, uint64_t session, uint64_t capacity,
                         std::vector<WireTraceEvent>& out, uint64_t& dropped) {
  Failure drained = drain(d);
  const auto found = queues_.find(session);
  dropped = 0;
  if (found == queues_.end()) return drained;
  Queue& queue = found->second;
  dropped = queue.dropped;
  const size_t count = static_cast<size_t>(std::min<uint64_t>(capacity, queue.events.size()));
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const CalrtTraceEvent& e = queue.events[i];
    WireTraceEvent& w = out.emplace_back();
    w.track = get_enum(e.track);
    w.kind = get_enum(e.kind);
    w.chip = e.chip;
    w.layer = e.layer;
    w.job_serial = e.job_serial;
    w.begin_ns = e.begin_ns;
    w.end_ns = e.end_ns;
    w.bytes = e.bytes;
    w.flops = e.flops;
    w.label = e.label != nullptr ? e.label : "";
  }
  queue.events.erase(queue.events.begin(),
                     queue.events.begin() + static_cast<std::ptrdiff_t>(count));
  if (!queue.recording && queue.events.empty()) queues_.erase(found);
  return drained;
}

void TraceDemux::leave(const Device& d, uint64_t session) {
  if (queues_.erase(session) == 0) return;
  if (!any_recording()) (void)stop_device(d);
}

}  // namespace simdev::service::server
