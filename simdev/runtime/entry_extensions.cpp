// Entry points of the simulator's ABI extensions (abi/calrt_ext.h): its clock and its trace.
// The device's clock and trace accessors serve the device itself too, so the state machine's
// check for these calls is made here (the device checks Clock_HostSpend itself).
#include <cstring>

#include "simdev/runtime/device_access.hpp"
#include "simdev/runtime/entry_guard.hpp"
#include "simdev/runtime/entry_points.hpp"

namespace simdev::runtime {

CalrtError* clock_get(Calrt_Clock_Get_Args* args) {
  return guarded(args, CALRT_CLOCK_GET_ARGS_STRUCT_SIZE, "Calrt_Clock_Get_Args", [&] {
    return with_handle(args->device, HandleKind::kDevice, "device",
                       [&](Device& device, ObjectId, uint32_t) -> Status {
                         if (auto allowed = device.require_allowed(DeviceCall::kClockGet);
                             !allowed) {
                           return allowed;
                         }
                         args->mode = device.paced() ? CALRT_CLOCK_PACED : CALRT_CLOCK_VIRTUAL;
                         args->device_time_ns = ps_to_ns(device.now());
                         return {};
                       });
  });
}

CalrtError* clock_host_spend(Calrt_Clock_HostSpend_Args* args) {
  return guarded(args, CALRT_CLOCK_HOST_SPEND_ARGS_STRUCT_SIZE, "Calrt_Clock_HostSpend_Args", [&] {
    return with_handle(args->device, HandleKind::kDevice, "device",
                       [&](Device& device, ObjectId, uint32_t) -> Status {
                         return device.host_spend(args->duration_ns);
                       });
  });
}

CalrtError* trace_enable(Calrt_Trace_Enable_Args* args) {
  return guarded(args, CALRT_TRACE_ENABLE_ARGS_STRUCT_SIZE, "Calrt_Trace_Enable_Args", [&] {
    return with_handle(args->device, HandleKind::kDevice, "device",
                       [&](Device& device, ObjectId, uint32_t) -> Status {
                         if (auto allowed = device.require_allowed(DeviceCall::kTraceEnable);
                             !allowed) {
                           return allowed;
                         }
                         if (args->enable == 0) {
                           device.trace_stop();
                           return {};
                         }
                         return device.trace_start(args->capacity_events);
                       });
  });
}

CalrtError* trace_read(Calrt_Trace_Read_Args* args) {
  return guarded(args, CALRT_TRACE_READ_ARGS_STRUCT_SIZE, "Calrt_Trace_Read_Args", [&] {
    return with_handle(
        args->device, HandleKind::kDevice, "device",
        [&](Device& device, ObjectId, uint32_t) -> Status {
          args->count = 0;
          if (auto allowed = device.require_allowed(DeviceCall::kTraceRead); !allowed) {
            return allowed;
          }
          if (args->capacity > 0 && args->events == nullptr) {
            return fail(CALRT_INVALID_ARGUMENT, "Trace_Read: events is NULL with capacity " +
                                                    std::to_string(args->capacity));
          }
          if (args->event_struct_size < sizeof(CalrtTraceEvent)) {
            return fail(CALRT_STRUCT_TOO_SMALL,
                        "Trace_Read: event_struct_size " + std::to_string(args->event_struct_size) +
                            " < " + std::to_string(sizeof(CalrtTraceEvent)));
          }
          // Bounded batches, so a huge capacity does not make the runtime allocate it.
          constexpr size_t kBatch = 1024;
          TraceRecord batch[kBatch];
          auto* out = reinterpret_cast<char*>(args->events);
          while (args->count < args->capacity) {
            const size_t want = std::min(kBatch, args->capacity - args->count);
            const size_t got = device.trace_drain(std::span<TraceRecord>(batch, want));
            for (size_t i = 0; i < got; ++i) {
              CalrtTraceEvent event{};
              event.track = batch[i].track;
              event.kind = batch[i].kind;
              event.chip = batch[i].chip;
              event.layer = batch[i].layer;
              event.job_serial = batch[i].job_serial;
              event.begin_ns = ps_to_ns(batch[i].begin_ps);
              event.end_ns = ps_to_ns(batch[i].end_ps);
              event.bytes = batch[i].bytes;
              event.flops = batch[i].flops;
              event.label = batch[i].label;
              char* slot = out + (args->count + i) * args->event_struct_size;
              std::memset(slot, 0, args->event_struct_size);
              std::memcpy(slot, &event, sizeof(event));
            }
            args->count += got;
            if (got < want) {
              break;
            }
          }
          args->dropped = device.trace_dropped();
          return {};
        });
  });
}

}  // namespace simdev::runtime
