// Entry points: buffers, their mappings and CSRs.
#include "simdev/runtime/device_access.hpp"
#include "simdev/runtime/entry_guard.hpp"
#include "simdev/runtime/entry_points.hpp"

namespace simdev::runtime {

CalrtError* buffer_create(Calrt_Buffer_Create_Args* args) {
  return guarded(args, CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE, "Calrt_Buffer_Create_Args", [&] {
    return with_handle(args->calbin, HandleKind::kCalbin, "calbin",
                       [&](Device& device, ObjectId calbin, uint32_t index) -> Status {
                         if (args->model_name == nullptr) {
                           return fail(CALRT_INVALID_ARGUMENT, "model_name is NULL");
                         }
                         const int64_t direction = raw_enum(args->direction);
                         if (direction != CALRT_INPUT && direction != CALRT_OUTPUT) {
                           return fail(CALRT_INVALID_ARGUMENT,
                                       "direction " + std::to_string(direction) + " is unknown");
                         }
                         auto id = device.buffer_create(calbin, args->model_name,
                                                        static_cast<CalrtDirection>(direction),
                                                        args->slot);
                         if (!id) {
                           return tl::unexpected(id.error());
                         }
                         args->buffer = to_handle<CalrtBuffer>(HandleKind::kBuffer, index, *id);
                         return {};
                       });
  });
}

CalrtError* buffer_destroy(Calrt_Buffer_Destroy_Args* args) {
  return guarded(args, CALRT_BUFFER_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Buffer_Destroy_Args", [&] {
    return with_handle(
        args->buffer, HandleKind::kBuffer, "buffer",
        [&](Device& device, ObjectId id, uint32_t) -> Status { return device.buffer_destroy(id); });
  });
}

CalrtError* buffer_map(Calrt_Buffer_Map_Args* args) {
  return guarded(args, CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE, "Calrt_Buffer_Map_Args", [&] {
    return with_handle(args->buffer, HandleKind::kBuffer, "buffer",
                       [&](Device& device, ObjectId id, uint32_t) -> Status {
                         // Mapping host-visible memory never waits: a busy buffer is reported
                         // at once, so timeout_ns is an upper bound that is never reached.
                         auto mapping = device.buffer_map(id, args->tensor_index);
                         if (!mapping) {
                           return tl::unexpected(mapping.error());
                         }
                         args->data = mapping->data;
                         args->size_bytes = mapping->size_bytes;
                         return {};
                       });
  });
}

CalrtError* buffer_unmap(Calrt_Buffer_Unmap_Args* args) {
  return guarded(args, CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE, "Calrt_Buffer_Unmap_Args", [&] {
    return with_handle(args->buffer, HandleKind::kBuffer, "buffer",
                       [&](Device& device, ObjectId id, uint32_t) -> Status {
                         return device.buffer_unmap(id, args->tensor_index);
                       });
  });
}

CalrtError* buffer_set_csr(Calrt_Buffer_SetCsr_Args* args) {
  return guarded(args, CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE, "Calrt_Buffer_SetCsr_Args", [&] {
    return with_handle(args->buffer, HandleKind::kBuffer, "buffer",
                       [&](Device& device, ObjectId id, uint32_t) -> Status {
                         return device.buffer_set_csr(id, args->csr_index, args->value);
                       });
  });
}

CalrtError* buffer_get_csr(Calrt_Buffer_GetCsr_Args* args) {
  return guarded(args, CALRT_BUFFER_GETCSR_ARGS_STRUCT_SIZE, "Calrt_Buffer_GetCsr_Args", [&] {
    return with_handle(args->buffer, HandleKind::kBuffer, "buffer",
                       [&](Device& device, ObjectId id, uint32_t) -> Status {
                         auto value = device.buffer_get_csr(id, args->csr_index);
                         if (!value) {
                           return tl::unexpected(value.error());
                         }
                         args->value = *value;
                         return {};
                       });
  });
}

}  // namespace simdev::runtime
