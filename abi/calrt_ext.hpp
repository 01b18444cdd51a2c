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
#include <string_view>
#include <vector>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.h"

namespace calrt {

namespace detail {
// The entry `fn` of an extension, or UNIMPLEMENTED naming the call and the extension.
template <class Fn>
Fn* extension_entry(Fn* fn, std::string_view name, std::string_view extension) {
  if (fn == nullptr) {
    throw Error(CALRT_UNIMPLEMENTED, name,
                "the runtime has no " + std::string(extension) + " extension");
  }
  return fn;
}
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

// One (kind, site) pair of the fault injector and how often it fired.
struct FaultHit {
  std::string kind;
  std::string site;
  uint64_t count = 0;
};

// CALRT_EXT_FAULT bound to one device.
class DeviceFaults {
 public:
  static DeviceFaults of(const Device& device) {
    DeviceFaults faults;
    faults.device_ = device.get();
    faults.api_ = device.api();
    faults.ext_ = reinterpret_cast<const CalrtFaultExtension*>(
        find_extension(device.api(), CALRT_EXT_FAULT, CALRT_FAULT_EXTENSION_STRUCT_SIZE));
    return faults;
  }
  explicit operator bool() const noexcept { return ext_ != nullptr && device_ != nullptr; }

  // Replaces the fault plan (YAML, simdev/device/FAULTS.md); "" injects nothing.
  void set_plan(std::string_view yaml) const {
    auto args = detail::make_args<Calrt_Fault_SetPlan_Args>();
    args.device = device_;
    args.plan = yaml.data();
    args.plan_size = yaml.size();
    api_.check(detail::extension_entry(ext_ ? ext_->Fault_SetPlan : nullptr, "Fault_SetPlan",
                                       "fault")(&args),
               "Fault_SetPlan");
  }

  // Every (kind, site) pair the runtime can inject at, with its count.
  std::vector<FaultHit> hits() const {
    std::vector<CalrtFaultHit> raw(64);
    // Two rounds: the first tells how many pairs there are when 64 is not enough.
    for (int round = 0; round < 2; ++round) {
      auto args = detail::make_args<Calrt_Fault_GetHits_Args>();
      args.device = device_;
      args.hits = raw.data();
      args.hit_struct_size = sizeof(CalrtFaultHit);
      args.capacity = raw.size();
      api_.check(detail::extension_entry(ext_ ? ext_->Fault_GetHits : nullptr, "Fault_GetHits",
                                         "fault")(&args),
                 "Fault_GetHits");
      if (args.count <= raw.size()) {
        std::vector<FaultHit> out;
        for (size_t i = 0; i < args.count; ++i) {
          out.push_back({detail::string_or_empty(raw[i].kind), detail::string_or_empty(raw[i].site),
                         raw[i].count});
        }
        return out;
      }
      raw.resize(std::min<size_t>(args.count, 1u << 16));
    }
    throw Error(CALRT_INTERNAL, "Fault_GetHits", "the number of fault sites kept changing");
  }

 private:
  CalrtDevice* device_ = nullptr;
  Api api_;
  const CalrtFaultExtension* ext_ = nullptr;
};

// CALRT_EXT_DIAG bound to one device.
class DeviceDiag {
 public:
  // A hang report is a few kilobytes; this bounds what a broken runtime can make us hold.
  static constexpr size_t kMaxReportBytes = size_t{16} << 20;

  static DeviceDiag of(const Device& device) {
    DeviceDiag diag;
    diag.device_ = device.get();
    diag.api_ = device.api();
    diag.ext_ = reinterpret_cast<const CalrtDiagExtension*>(
        find_extension(device.api(), CALRT_EXT_DIAG, CALRT_DIAG_EXTENSION_STRUCT_SIZE));
    return diag;
  }
  explicit operator bool() const noexcept { return ext_ != nullptr && device_ != nullptr; }

  // The hang report (JSON text). Take it before a reset: the reset clears what it shows.
  std::string report() const {
    std::string text(4096, '\0');
    for (int round = 0; round < 2; ++round) {
      auto args = detail::make_args<Calrt_Diag_Report_Args>();
      args.device = device_;
      args.buffer = text.data();
      args.capacity = text.size();
      api_.check(
          detail::extension_entry(ext_ ? ext_->Diag_Report : nullptr, "Diag_Report", "diag")(&args),
          "Diag_Report");
      if (args.size <= text.size()) {
        text.resize(args.size);
        return text;
      }
      if (args.size > kMaxReportBytes) {
        throw Error(CALRT_INTERNAL, "Diag_Report",
                    "report of " + std::to_string(args.size) + " bytes exceeds the bound");
      }
      text.assign(args.size, '\0');
    }
    throw Error(CALRT_INTERNAL, "Diag_Report", "the report kept growing between two calls");
  }

  uint64_t state_hash() const {
    auto args = detail::make_args<Calrt_Diag_StateHash_Args>();
    args.device = device_;
    api_.check(detail::extension_entry(ext_ ? ext_->Diag_StateHash : nullptr, "Diag_StateHash",
                                       "diag")(&args),
               "Diag_StateHash");
    return args.hash;
  }

 private:
  CalrtDevice* device_ = nullptr;
  Api api_;
  const CalrtDiagExtension* ext_ = nullptr;
};

// CALRT_EXT_PROBE: the residual stream of a completed job's last token at every layer
// boundary (calbin/MODEL.md, "The device contract"). Simulated devices offer it; a runtime
// without it gives an empty JobProbes.
class JobProbes {
 public:
  // Bounds what a broken runtime can make us allocate: points x hidden floats.
  static constexpr size_t kMaxValues = size_t{64} << 20;

  static JobProbes of(const Job& job) {
    JobProbes probes;
    probes.job_ = job.get();
    probes.api_ = job.api();
    probes.ext_ = reinterpret_cast<const CalrtProbeExtension*>(
        find_extension(job.api(), CALRT_EXT_PROBE, CALRT_PROBE_EXTENSION_STRUCT_SIZE));
    return probes;
  }
  explicit operator bool() const noexcept { return ext_ != nullptr && job_ != nullptr; }

  // Every point, [points][hidden]: the embedding, then after each layer's attention and MLP.
  std::vector<std::vector<float>> read_all() const {
    Calrt_Probe_Read_Args first = read(0, nullptr, 0);
    if (uint64_t{first.points} * first.count > kMaxValues) {
      throw Error(CALRT_INTERNAL, "Probe_Read",
                  std::to_string(first.points) + " points of " + std::to_string(first.count) +
                      " values exceed the bound");
    }
    std::vector<std::vector<float>> points(first.points, std::vector<float>(first.count));
    for (uint32_t p = 0; p < first.points; ++p) {
      const Calrt_Probe_Read_Args args = read(p, points[p].data(), points[p].size());
      if (args.count != first.count || args.points != first.points) {
        throw Error(CALRT_INTERNAL, "Probe_Read", "the probe shape changed between two calls");
      }
    }
    return points;
  }

 private:
  Calrt_Probe_Read_Args read(uint32_t point, float* values, size_t capacity) const {
    auto args = detail::make_args<Calrt_Probe_Read_Args>();
    args.job = job_;
    args.point = point;
    args.values = values;
    args.capacity = capacity;
    api_.check(
        detail::extension_entry(ext_ ? ext_->Probe_Read : nullptr, "Probe_Read", "probe")(&args),
        "Probe_Read");
    return args;
  }

  CalrtJob* job_ = nullptr;
  Api api_;
  const CalrtProbeExtension* ext_ = nullptr;
};

}  // namespace calrt
