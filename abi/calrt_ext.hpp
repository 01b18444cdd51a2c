// calrt_ext.hpp: C++ access to the optional ABI extensions (calrt_ext.h).
//
// Each accessor is empty when the runtime does not offer the extension (real hardware
// usually does not), so callers test it like a pointer:
//
//   if (auto clock = calrt::DeviceClock::of(device)) clock.host_spend(host_work);
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.h"

namespace calrt {

namespace detail {
template <>
inline constexpr size_t kStructSize<Calrt_Clock_Get_Args> = CALRT_CLOCK_GET_ARGS_STRUCT_SIZE;
template <>
inline constexpr size_t kStructSize<Calrt_Clock_HostSpend_Args> =
    CALRT_CLOCK_HOST_SPEND_ARGS_STRUCT_SIZE;
template <>
inline constexpr size_t kStructSize<Calrt_Trace_Enable_Args> = CALRT_TRACE_ENABLE_ARGS_STRUCT_SIZE;
template <>
inline constexpr size_t kStructSize<Calrt_Trace_Read_Args> = CALRT_TRACE_READ_ARGS_STRUCT_SIZE;
}  // namespace detail

// The extension of `type` in the runtime's chain whose struct_size covers min_size, or
// nullptr. The chain is bounded so that a cyclic (corrupt) chain cannot hang the caller.
inline const CalrtExtensionBase* find_extension(const Api& api, CalrtExtensionType type,
                                                size_t min_size) {
  if (!api) {
    return nullptr;
  }
  const auto* ext = static_cast<const CalrtExtensionBase*>(api.table()->extension);
  for (int hops = 0; ext != nullptr && hops < 64; ++hops, ext = ext->next) {
    if (ext->type == type && ext->struct_size >= min_size) {
      return ext;
    }
  }
  return nullptr;
}

enum class ClockMode { virtual_time = CALRT_CLOCK_VIRTUAL, paced = CALRT_CLOCK_PACED };

// CALRT_EXT_CLOCK bound to one device.
class DeviceClock {
 public:
  static DeviceClock of(const Device& device) {
    DeviceClock clock;
    clock.device_ = device.get();
    clock.api_ = device.api();
    clock.ext_ = reinterpret_cast<const CalrtClockExtension*>(
        find_extension(device.api(), CALRT_EXT_CLOCK, CALRT_CLOCK_EXTENSION_STRUCT_SIZE));
    return clock;
  }
  explicit operator bool() const noexcept { return ext_ != nullptr && device_ != nullptr; }

  ClockMode mode() const { return static_cast<ClockMode>(get().mode); }
  std::chrono::nanoseconds now() const {
    return std::chrono::nanoseconds(static_cast<int64_t>(get().device_time_ns));
  }

  // The host spent `duration` on its own work (Clock_HostSpend): a virtual clock advances
  // by it with the device running meanwhile.
  void host_spend(std::chrono::nanoseconds duration) const {
    auto args = detail::make_args<Calrt_Clock_HostSpend_Args>();
    args.device = device_;
    args.duration_ns = static_cast<uint64_t>(std::max<int64_t>(duration.count(), 0));
    api_.check(entry(ext_ ? ext_->Clock_HostSpend : nullptr, "Clock_HostSpend")(&args),
               "Clock_HostSpend");
  }

 private:
  template <class Fn>
  static Fn* entry(Fn* fn, std::string_view name) {
    if (fn == nullptr) {
      throw Error(CALRT_UNIMPLEMENTED, name, "the runtime has no clock extension");
    }
    return fn;
  }
  Calrt_Clock_Get_Args get() const {
    auto args = detail::make_args<Calrt_Clock_Get_Args>();
    args.device = device_;
    api_.check(entry(ext_ ? ext_->Clock_Get : nullptr, "Clock_Get")(&args), "Clock_Get");
    return args;
  }

  CalrtDevice* device_ = nullptr;
  Api api_;
  const CalrtClockExtension* ext_ = nullptr;
};

enum class TraceTrack {
  chip = CALRT_TRACK_CHIP,
  pcie_h2d = CALRT_TRACK_PCIE_H2D,
  pcie_d2h = CALRT_TRACK_PCIE_D2H,
  d2d = CALRT_TRACK_D2D,
  queue = CALRT_TRACK_QUEUE,
};
enum class TraceKind {
  queued = CALRT_TRACE_QUEUED,
  h2d = CALRT_TRACE_H2D,
  compute = CALRT_TRACE_COMPUTE,
  d2d = CALRT_TRACE_D2D,
  d2h = CALRT_TRACE_D2H,
};

// CalrtTraceEvent, converted (times on the device clock).
struct TraceEvent {
  TraceTrack track = TraceTrack::chip;
  TraceKind kind = TraceKind::compute;
  uint32_t chip = 0;
  int32_t layer = -1;
  uint64_t job_serial = 0;
  std::chrono::nanoseconds begin{0};
  std::chrono::nanoseconds end{0};
  uint64_t bytes = 0;
  uint64_t flops = 0;
  std::string label;
};

// CALRT_EXT_TRACE bound to one device.
class DeviceTrace {
 public:
  // The most events one drain() returns; the simulator's recording holds at most 2^24.
  static constexpr size_t kMaxDrain = size_t{1} << 24;

  static DeviceTrace of(const Device& device) {
    DeviceTrace trace;
    trace.device_ = device.get();
    trace.api_ = device.api();
    trace.ext_ = reinterpret_cast<const CalrtTraceExtension*>(
        find_extension(device.api(), CALRT_EXT_TRACE, CALRT_TRACE_EXTENSION_STRUCT_SIZE));
    return trace;
  }
  explicit operator bool() const noexcept { return ext_ != nullptr && device_ != nullptr; }

  // Starts recording afresh (capacity 0: the runtime's default bound).
  void start(uint64_t capacity_events = 0) const { enable(1, capacity_events); }
  void stop() const { enable(0, 0); }

  // Drains everything recorded so far, oldest first; `dropped` (if given) receives the
  // count lost to the bound.
  std::vector<TraceEvent> drain(uint64_t* dropped = nullptr) const {
    std::vector<TraceEvent> out;
    std::vector<CalrtTraceEvent> batch(4096);
    for (;;) {
      auto args = detail::make_args<Calrt_Trace_Read_Args>();
      args.device = device_;
      args.events = batch.data();
      args.event_struct_size = sizeof(CalrtTraceEvent);
      args.capacity = batch.size();
      api_.check(entry(ext_ ? ext_->Trace_Read : nullptr, "Trace_Read")(&args), "Trace_Read");
      if (dropped != nullptr) {
        *dropped = args.dropped;
      }
      for (size_t i = 0; i < args.count && i < batch.size(); ++i) {
        const CalrtTraceEvent& e = batch[i];
        TraceEvent event;
        event.track = static_cast<TraceTrack>(detail::raw_enum(e.track));
        event.kind = static_cast<TraceKind>(detail::raw_enum(e.kind));
        event.chip = e.chip;
        event.layer = e.layer;
        event.job_serial = e.job_serial;
        event.begin = std::chrono::nanoseconds(static_cast<int64_t>(e.begin_ns));
        event.end = std::chrono::nanoseconds(static_cast<int64_t>(e.end_ns));
        event.bytes = e.bytes;
        event.flops = e.flops;
        event.label = detail::string_or_empty(e.label);
        out.push_back(std::move(event));
      }
      // Bounded even against a runtime that never stops returning full batches.
      if (args.count < batch.size() || out.size() >= kMaxDrain) {
        return out;
      }
    }
  }

 private:
  template <class Fn>
  static Fn* entry(Fn* fn, std::string_view name) {
    if (fn == nullptr) {
      throw Error(CALRT_UNIMPLEMENTED, name, "the runtime has no trace extension");
    }
    return fn;
  }
  void enable(uint32_t on, uint64_t capacity) const {
    auto args = detail::make_args<Calrt_Trace_Enable_Args>();
    args.device = device_;
    args.enable = on;
    args.capacity_events = capacity;
    api_.check(entry(ext_ ? ext_->Trace_Enable : nullptr, "Trace_Enable")(&args), "Trace_Enable");
  }

  CalrtDevice* device_ = nullptr;
  Api api_;
  const CalrtTraceExtension* ext_ = nullptr;
};

}  // namespace calrt
