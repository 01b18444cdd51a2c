// Entry points of the fault extension (CALRT_EXT_FAULT): the device's fault plan and how
// often each fault kind fired at each site (simdev/device/FAULTS.md).
#include <cstring>
#include <string_view>

#include "simdev/runtime/device_access.hpp"
#include "simdev/runtime/entry_guard.hpp"
#include "simdev/runtime/entry_points.hpp"

namespace simdev::runtime {

CalrtError* fault_set_plan(Calrt_Fault_SetPlan_Args* args) {
  return guarded(args, CALRT_FAULT_SET_PLAN_ARGS_STRUCT_SIZE, "Calrt_Fault_SetPlan_Args", [&] {
    return with_handle(
        args->device, HandleKind::kDevice, "device",
        [&](Device& device, ObjectId, uint32_t) -> Status {
          if (auto allowed = device.require_allowed(DeviceCall::kFaultSetPlan); !allowed) {
            return allowed;
          }
          if (args->plan == nullptr && args->plan_size > 0) {
            return fail(CALRT_INVALID_ARGUMENT, "Fault_SetPlan: plan is NULL with plan_size " +
                                                    std::to_string(args->plan_size));
          }
          const std::string_view yaml = args->plan == nullptr
                                            ? std::string_view()
                                            : std::string_view(args->plan, args->plan_size);
          return device.set_fault_plan(yaml);
        });
  });
}

CalrtError* fault_get_hits(Calrt_Fault_GetHits_Args* args) {
  return guarded(args, CALRT_FAULT_GET_HITS_ARGS_STRUCT_SIZE, "Calrt_Fault_GetHits_Args", [&] {
    return with_handle(
        args->device, HandleKind::kDevice, "device",
        [&](Device& device, ObjectId, uint32_t) -> Status {
          args->count = 0;
          if (auto allowed = device.require_allowed(DeviceCall::kFaultGetHits); !allowed) {
            return allowed;
          }
          if (args->capacity > 0 && args->hits == nullptr) {
            return fail(CALRT_INVALID_ARGUMENT, "Fault_GetHits: hits is NULL with capacity " +
                                                    std::to_string(args->capacity));
          }
          if (args->hit_struct_size < sizeof(CalrtFaultHit)) {
            return fail(CALRT_STRUCT_TOO_SMALL, "Fault_GetHits: hit_struct_size " +
                                                    std::to_string(args->hit_struct_size) + " < " +
                                                    std::to_string(sizeof(CalrtFaultHit)));
          }
          const std::vector<FaultHitCount> hits = device.fault_hits();
          auto* out = reinterpret_cast<char*>(args->hits);
          for (size_t i = 0; i < hits.size() && i < args->capacity; ++i) {
            // to_string gives static storage, as the ABI promises for kind and site.
            const CalrtFaultHit hit{to_string(hits[i].kind), to_string(hits[i].site),
                                    hits[i].count};
            char* slot = out + i * args->hit_struct_size;
            std::memset(slot, 0, args->hit_struct_size);
            std::memcpy(slot, &hit, sizeof(hit));
          }
          args->count = hits.size();
          return {};
        });
  });
}

}  // namespace simdev::runtime
