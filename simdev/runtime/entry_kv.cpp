// Entry points: KV handles.
#include "simdev/runtime/entry_guard.hpp"
#include "simdev/runtime/entry_points.hpp"
#include "simdev/runtime/object_ids.hpp"

namespace simdev::runtime {

CalrtError* kv_allocate(Calrt_Kv_Allocate_Args* args) {
  return guarded(args, CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE, "Calrt_Kv_Allocate_Args", [&] {
    return with_handle(args->calbin, HandleKind::kCalbin, "calbin",
                       [&](Device& device, ObjectId calbin, uint32_t index) -> Status {
                         auto id = device.kv_allocate(calbin, args->capacity_tokens);
                         if (!id) {
                           return tl::unexpected(id.error());
                         }
                         args->kv = to_handle<CalrtKv>(HandleKind::kKv, index, *id);
                         return {};
                       });
  });
}

CalrtError* kv_apply(Calrt_Kv_Apply_Args* args) {
  return guarded(args, CALRT_KV_APPLY_ARGS_STRUCT_SIZE_0_7, "Calrt_Kv_Apply_Args", [&] {
    // `row` came in ABI 0.8; an older caller's struct ends before it and means row 0.
    const uint32_t row = args->struct_size >= CALRT_KV_APPLY_ARGS_STRUCT_SIZE ? args->row : 0;
    return with_handle(args->kv, HandleKind::kKv, "kv",
                       [&](Device& device, ObjectId kv, uint32_t index) -> Status {
                         auto input =
                             same_device_id(args->input, HandleKind::kBuffer, "buffer", index);
                         if (!input) {
                           return tl::unexpected(input.error());
                         }
                         return device.kv_apply(kv, *input, row);
                       });
  });
}

CalrtError* kv_free(Calrt_Kv_Free_Args* args) {
  return guarded(args, CALRT_KV_FREE_ARGS_STRUCT_SIZE, "Calrt_Kv_Free_Args", [&] {
    return with_handle(
        args->kv, HandleKind::kKv, "kv",
        [&](Device& device, ObjectId kv, uint32_t) -> Status { return device.kv_free(kv); });
  });
}

CalrtError* kv_clear(Calrt_Kv_Clear_Args* args) {
  return guarded(args, CALRT_KV_CLEAR_ARGS_STRUCT_SIZE, "Calrt_Kv_Clear_Args", [&] {
    return with_handle(
        args->kv, HandleKind::kKv, "kv",
        [&](Device& device, ObjectId kv, uint32_t) -> Status { return device.kv_clear(kv); });
  });
}

CalrtError* kv_info(Calrt_Kv_Info_Args* args) {
  return guarded(args, CALRT_KV_INFO_ARGS_STRUCT_SIZE, "Calrt_Kv_Info_Args", [&] {
    return with_handle(args->kv, HandleKind::kKv, "kv",
                       [&](Device& device, ObjectId kv, uint32_t) -> Status {
                         auto info = device.kv_info(kv);
                         if (!info) {
                           return tl::unexpected(info.error());
                         }
                         args->capacity_tokens = static_cast<uint32_t>(info->capacity_tokens);
                         args->filled_tokens = static_cast<uint32_t>(info->filled_tokens);
                         return {};
                       });
  });
}

CalrtError* kv_capacity(Calrt_Kv_Capacity_Args* args) {
  return guarded(args, CALRT_KV_CAPACITY_ARGS_STRUCT_SIZE, "Calrt_Kv_Capacity_Args", [&] {
    return with_handle(args->calbin, HandleKind::kCalbin, "calbin",
                       [&](Device& device, ObjectId calbin, uint32_t) -> Status {
                         auto c = device.kv_capacity(calbin);
                         if (!c) {
                           return tl::unexpected(c.error());
                         }
                         args->total_tokens = c->total_tokens;
                         args->free_tokens = c->free_tokens;
                         args->largest_free_tokens = c->largest_free_tokens;
                         args->bytes_per_token_per_chip = c->bytes_per_token_per_chip;
                         args->live_handles = c->live_handles;
                         return {};
                       });
  });
}

}  // namespace simdev::runtime
