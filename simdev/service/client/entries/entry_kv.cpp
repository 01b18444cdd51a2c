// Entries: KV handles.
#include "simdev/service/client/entries/entry_points.hpp"
#include "simdev/service/client/entries/entry_support.hpp"

namespace simdev::service::client {

CalrtError* kv_allocate(Calrt_Kv_Allocate_Args* args) {
  return guarded(
      args, CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE, "Calrt_Kv_Allocate_Args", [&]() -> Status {
        auto calbin = resolve_calbin(args->calbin, "calbin");
        if (!calbin) {
          return tl::unexpected(calbin.error());
        }
        ClientDevice& device = *calbin->device;
        auto in = wire_in<KvAllocate>(*args);
        in.calbin = WireHandle{calbin->wire};
        return forward<KvAllocate>(device, in, [&](const KvAllocate::Out& out) -> Status {
          auto kv = std::make_shared<ClientKv>();
          kv->wire = out.kv.id;
          std::optional<LocalId> id;
          {
            std::lock_guard lock(device.mutex);
            id = device.kvs.insert(kv);
          }
          if (!id) {
            (void)round_trip<KvFree>(device, KvFree::In{out.kv});
            return fail(CALRT_OUT_OF_RANGE, "too many KV handles on the device");
          }
          args->kv = to_handle<CalrtKv>(HandleKind::kKv, device.slot, *id);
          return {};
        });
      });
}

CalrtError* kv_apply(Calrt_Kv_Apply_Args* args) {
  return guarded(args, CALRT_KV_APPLY_ARGS_STRUCT_SIZE_0_7, "Calrt_Kv_Apply_Args", [&]() -> Status {
    auto kv = resolve_kv(args->kv, "kv");
    if (!kv) {
      return tl::unexpected(kv.error());
    }
    auto input = resolve_buffer_of(*kv->device, args->input, "buffer");
    if (!input) {
      return tl::unexpected(input.error());
    }
    // `row` came in ABI 0.8: an older caller's struct ends before it and means row 0.
    auto in = wire_in<KvApply>(*args);
    in.kv = WireHandle{kv->wire};
    in.input = WireHandle{input->wire};
    return forward<KvApply>(*kv->device, in);
  });
}

CalrtError* kv_free(Calrt_Kv_Free_Args* args) {
  return guarded(args, CALRT_KV_FREE_ARGS_STRUCT_SIZE, "Calrt_Kv_Free_Args", [&]() -> Status {
    auto kv = resolve_kv(args->kv, "kv");
    if (!kv) {
      return tl::unexpected(kv.error());
    }
    ClientDevice& device = *kv->device;
    if (!device.lost()) {
      if (Status ok = forward<KvFree>(device, KvFree::In{WireHandle{kv->wire}});
          !ok && ok.error().code != CALRT_DEVICE_LOST) {
        return ok;
      }
    }
    std::lock_guard lock(device.mutex);
    device.kvs.erase(kv->id);
    return {};
  });
}

CalrtError* kv_clear(Calrt_Kv_Clear_Args* args) {
  return guarded(args, CALRT_KV_CLEAR_ARGS_STRUCT_SIZE, "Calrt_Kv_Clear_Args", [&]() -> Status {
    auto kv = resolve_kv(args->kv, "kv");
    if (!kv) {
      return tl::unexpected(kv.error());
    }
    return forward<KvClear>(*kv->device, KvClear::In{WireHandle{kv->wire}});
  });
}

CalrtError* kv_info(Calrt_Kv_Info_Args* args) {
  return guarded(args, CALRT_KV_INFO_ARGS_STRUCT_SIZE, "Calrt_Kv_Info_Args", [&]() -> Status {
    auto kv = resolve_kv(args->kv, "kv");
    if (!kv) {
      return tl::unexpected(kv.error());
    }
    return forward<KvInfo>(*kv->device, KvInfo::In{WireHandle{kv->wire}},
                           [&](const KvInfo::Out& out) -> Status {
                             fill_outs<KvInfo>(out, *args);
                             return {};
                           });
  });
}

CalrtError* kv_capacity(Calrt_Kv_Capacity_Args* args) {
  return guarded(
      args, CALRT_KV_CAPACITY_ARGS_STRUCT_SIZE, "Calrt_Kv_Capacity_Args", [&]() -> Status {
        auto calbin = resolve_calbin(args->calbin, "calbin");
        if (!calbin) {
          return tl::unexpected(calbin.error());
        }
        return forward<KvCapacity>(*calbin->device, KvCapacity::In{WireHandle{calbin->wire}},
                                   [&](const KvCapacity::Out& out) -> Status {
                                     fill_outs<KvCapacity>(out, *args);
                                     return {};
                                   });
      });
}

}  // namespace simdev::service::client
