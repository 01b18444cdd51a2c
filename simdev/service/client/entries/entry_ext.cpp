// Entries of the extensions (calrt_ext.h: CLOCK, TRACE, FAULT, DIAG), forwarded to the
// daemon's device. Trace labels and fault kinds/sites come back as strings and are interned
// process-wide, since the ABI promises them static storage.
#include <algorithm>
#include <cstring>

#include "simdev/service/client/entries/entry_points.hpp"
#include "simdev/service/client/entries/entry_support.hpp"

namespace simdev::service::client {

CalrtError* clock_get(Calrt_Clock_Get_Args* args) {
  return guarded(args, CALRT_CLOCK_GET_ARGS_STRUCT_SIZE, "Calrt_Clock_Get_Args", [&]() -> Status {
    auto device = resolve_device(args->device, "device");
    if (!device) {
      return tl::unexpected(device.error());
    }
    return forward<ClockGet>(**device, ClockGet::In{WireHandle{(*device)->wire_id()}},
                             [&](const ClockGet::Out& out) -> Status {
                               fill_outs<ClockGet>(out, *args);
                               return {};
                             });
  });
}

CalrtError* clock_host_spend(Calrt_Clock_HostSpend_Args* args) {
  return guarded(args, CALRT_CLOCK_HOST_SPEND_ARGS_STRUCT_SIZE, "Calrt_Clock_HostSpend_Args",
                 [&]() -> Status {
                   auto device = resolve_device(args->device, "device");
                   if (!device) {
                     return tl::unexpected(device.error());
                   }
                   auto in = wire_in<ClockHostSpend>(*args);
                   in.device = WireHandle{(*device)->wire_id()};
                   return forward<ClockHostSpend>(**device, in);
                 });
}

CalrtError* trace_enable(Calrt_Trace_Enable_Args* args) {
  return guarded(args, CALRT_TRACE_ENABLE_ARGS_STRUCT_SIZE, "Calrt_Trace_Enable_Args",
                 [&]() -> Status {
                   auto device = resolve_device(args->device, "device");
                   if (!device) {
                     return tl::unexpected(device.error());
                   }
                   auto in = wire_in<TraceEnable>(*args);
                   in.device = WireHandle{(*device)->wire_id()};
                   return forward<TraceEnable>(**device, in);
                 });
}

CalrtError* trace_read(Calrt_Trace_Read_Args* args) {
  return guarded(args, CALRT_TRACE_READ_ARGS_STRUCT_SIZE, "Calrt_Trace_Read_Args", [&]() -> Status {
    auto device = resolve_device(args->device, "device");
    if (!device) {
      return tl::unexpected(device.error());
    }
    args->count = 0;
    if (args->capacity > 0 && args->events == nullptr) {
      return fail(CALRT_INVALID_ARGUMENT,
                  "Trace_Read: events is NULL with capacity " + std::to_string(args->capacity));
    }
    if (args->event_struct_size < sizeof(CalrtTraceEvent)) {
      return fail(CALRT_STRUCT_TOO_SMALL, "Trace_Read: event_struct_size " +
                                              std::to_string(args->event_struct_size) + " < " +
                                              std::to_string(sizeof(CalrtTraceEvent)));
    }
    TraceRead::In in;
    in.device = WireHandle{(*device)->wire_id()};
    in.capacity = args->capacity;
    return forward<TraceRead>(**device, in, [&](const TraceRead::Out& out) -> Status {
      auto* slots = reinterpret_cast<char*>(args->events);
      const size_t n = std::min<size_t>(out.events.size(), args->capacity);
      for (size_t i = 0; i < n; ++i) {
        const WireTraceEvent& e = out.events[i];
        CalrtTraceEvent event{};
        event.track = static_cast<CalrtTraceTrack>(e.track);
        event.kind = static_cast<CalrtTraceKind>(e.kind);
        event.chip = e.chip;
        event.layer = e.layer;
        event.job_serial = e.job_serial;
        event.begin_ns = e.begin_ns;
        event.end_ns = e.end_ns;
        event.bytes = e.bytes;
        event.flops = e.flops;
        event.label = intern_static(e.label);
        char* slot = slots + i * args->event_struct_size;
        std::memset(slot, 0, args->event_struct_size);
        std::memcpy(slot, &event, sizeof event);
      }
      args->count = n;
      args->dropped = out.dropped;
      return {};
    });
  });
}

CalrtError* fault_set_plan(Calrt_Fault_SetPlan_Args* args) {
  return guarded(args, CALRT_FAULT_SET_PLAN_ARGS_STRUCT_SIZE, "Calrt_Fault_SetPlan_Args",
                 [&]() -> Status {
                   auto device = resolve_device(args->device, "device");
                   if (!device) {
                     return tl::unexpected(device.error());
                   }
                   FaultSetPlan::In in;
                   in.device = WireHandle{(*device)->wire_id()};
                   in.plan_null = args->plan == nullptr ? 1 : 0;
                   in.plan_size = args->plan_size;
                   if (args->plan != nullptr) {
                     const auto* bytes = reinterpret_cast<const uint8_t*>(args->plan);
                     in.plan.assign(bytes, bytes + args->plan_size);
                   }
                   return forward<FaultSetPlan>(**device, in);
                 });
}

CalrtError* fault_get_hits(Calrt_Fault_GetHits_Args* args) {
  return guarded(
      args, CALRT_FAULT_GET_HITS_ARGS_STRUCT_SIZE, "Calrt_Fault_GetHits_Args", [&]() -> Status {
        auto device = resolve_device(args->device, "device");
        if (!device) {
          return tl::unexpected(device.error());
        }
        args->count = 0;
        if (args->capacity > 0 && args->hits == nullptr) {
          return fail(CALRT_INVALID_ARGUMENT, "Fault_GetHits: hits is NULL with capacity " +
                                                  std::to_string(args->capacity));
        }
        if (args->hit_struct_size < sizeof(CalrtFaultHit)) {
          return fail(CALRT_STRUCT_TOO_SMALL, "Fault_GetHits: hit_struct_size " +
                                                  std::to_string(args->hit_struct_size) + " < " +
                                                  std::to_string(sizeof(CalrtFaultHit)));
        }
        FaultGetHits::In in;
        in.device = WireHandle{(*device)->wire_id()};
        in.capacity = args->capacity;
        return forward<FaultGetHits>(**device, in, [&](const FaultGetHits::Out& out) -> Status {
          auto* slots = reinterpret_cast<char*>(args->hits);
          const size_t n = std::min<size_t>(out.hits.size(), args->capacity);
          for (size_t i = 0; i < n; ++i) {
            const CalrtFaultHit hit{intern_static(out.hits[i].kind),
                                    intern_static(out.hits[i].site), out.hits[i].count};
            char* slot = slots + i * args->hit_struct_size;
            std::memset(slot, 0, args->hit_struct_size);
            std::memcpy(slot, &hit, sizeof hit);
          }
          args->count = static_cast<size_t>(out.count);
          return {};
        });
      });
}

CalrtError* diag_report(Calrt_Diag_Report_Args* args) {
  return guarded(
      args, CALRT_DIAG_REPORT_ARGS_STRUCT_SIZE, "Calrt_Diag_Report_Args", [&]() -> Status {
        auto device = resolve_device(args->device, "device");
        if (!device) {
          return tl::unexpected(device.error());
        }
        args->size = 0;
        if (args->capacity > 0 && args->buffer == nullptr) {
          return fail(CALRT_INVALID_ARGUMENT, "Diag_Report: buffer is NULL with capacity " +
                                                  std::to_string(args->capacity));
        }
        DiagReport::In in;
        in.device = WireHandle{(*device)->wire_id()};
        in.capacity = args->capacity;
        return forward<DiagReport>(**device, in, [&](const DiagReport::Out& out) -> Status {
          args->size = static_cast<size_t>(out.size);
          // All or nothing, as the simulator: a cut JSON object is useless.
          if (!out.report.empty() && out.report.size() <= args->capacity &&
              out.report.size() == out.size) {
            std::memcpy(args->buffer, out.report.data(), out.report.size());
          }
          return {};
        });
      });
}

CalrtError* diag_state_hash(Calrt_Diag_StateHash_Args* args) {
  return guarded(
      args, CALRT_DIAG_STATE_HASH_ARGS_STRUCT_SIZE, "Calrt_Diag_StateHash_Args", [&]() -> Status {
        auto device = resolve_device(args->device, "device");
        if (!device) {
          return tl::unexpected(device.error());
        }
        return forward<DiagStateHash>(**device, DiagStateHash::In{WireHandle{(*device)->wire_id()}},
                                      [&](const DiagStateHash::Out& out) -> Status {
                                        fill_outs<DiagStateHash>(out, *args);
                                        return {};
                                      });
      });
}

}  // namespace simdev::service::client
