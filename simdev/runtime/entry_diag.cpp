// Entry points of the diag extension (CALRT_EXT_DIAG): the hang report and the state hash.
// Both are allowed in every device state: they are how a host learns why a device faulted
// or went away.
#include <cstring>
#include <string>

#include "simdev/runtime/device_access.hpp"
#include "simdev/runtime/entry_guard.hpp"
#include "simdev/runtime/entry_points.hpp"

namespace simdev::runtime {

CalrtError* diag_report(Calrt_Diag_Report_Args* args) {
  return guarded(args, CALRT_DIAG_REPORT_ARGS_STRUCT_SIZE, "Calrt_Diag_Report_Args", [&] {
    return with_handle(
        args->device, HandleKind::kDevice, "device",
        [&](Device& device, ObjectId, uint32_t) -> Status {
          args->size = 0;
          if (auto allowed = device.require_allowed(DeviceCall::kDiagReport); !allowed) {
            return allowed;
          }
          if (args->capacity > 0 && args->buffer == nullptr) {
            return fail(CALRT_INVALID_ARGUMENT, "Diag_Report: buffer is NULL with capacity " +
                                                    std::to_string(args->capacity));
          }
          const std::string report = device.hang_report();
          args->size = report.size();
          // All or nothing: a truncated JSON object is of no use to anyone.
          if (!report.empty() && report.size() <= args->capacity) {
            std::memcpy(args->buffer, report.data(), report.size());
          }
          return {};
        });
  });
}

CalrtError* diag_state_hash(Calrt_Diag_StateHash_Args* args) {
  return guarded(args, CALRT_DIAG_STATE_HASH_ARGS_STRUCT_SIZE, "Calrt_Diag_StateHash_Args", [&] {
    return with_handle(args->device, HandleKind::kDevice, "device",
                       [&](Device& device, ObjectId, uint32_t) -> Status {
                         if (auto allowed = device.require_allowed(DeviceCall::kDiagStateHash);
                             !allowed) {
                           return allowed;
                         }
                         args->hash = device.state_hash();
                         return {};
                       });
  });
}

}  // namespace simdev::runtime
