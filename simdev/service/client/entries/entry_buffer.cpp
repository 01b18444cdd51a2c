// Entries: buffers, their mappings and CSRs. Mapped memory is the client's (mapping.hpp):
// Buffer_Map fetches the bytes into the buffer's shadow, Buffer_Unmap of an input sends
// them back. Between jobs the client answers a map of an input it fetched before, an unmap,
// and a CSR it set before itself, and holds the call for the next submit (held_calls.hpp).
#include "simdev/service/client/entries/entry_points.hpp"
#include "simdev/service/client/entries/entry_support.hpp"

namespace simdev::service::client {

CalrtError* buffer_create(Calrt_Buffer_Create_Args* args) {
  return guarded(
      args, CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE, "Calrt_Buffer_Create_Args", [&]() -> Status {
        auto calbin = resolve_calbin(args->calbin, "calbin");
        if (!calbin) {
          return tl::unexpected(calbin.error());
        }
        ClientDevice& device = *calbin->device;
        auto in = wire_in<BufferCreate>(*args);
        in.calbin = WireHandle{calbin->wire};
        return forward<BufferCreate>(device, in, [&](const BufferCreate::Out& out) -> Status {
          auto buffer = std::make_shared<ClientBuffer>();
          buffer->wire = out.buffer.id;
          buffer->input = raw_enum(args->direction) == CALRT_INPUT;
          std::optional<LocalId> id;
          {
            std::lock_guard lock(device.mutex);
            buffer->serial = device.next_serial++;
            id = device.buffers.insert(buffer);
          }
          if (!id) {
            (void)round_trip<BufferDestroy>(device, BufferDestroy::In{out.buffer});
            return fail(CALRT_OUT_OF_RANGE, "too many buffers on the device");
          }
          args->buffer = to_handle<CalrtBuffer>(HandleKind::kBuffer, device.slot, *id);
          return {};
        });
      });
}

CalrtError* buffer_destroy(Calrt_Buffer_Destroy_Args* args) {
  return guarded(
      args, CALRT_BUFFER_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Buffer_Destroy_Args", [&]() -> Status {
        auto buffer = resolve_buffer(args->buffer, "buffer");
        if (!buffer) {
          return tl::unexpected(buffer.error());
        }
        ClientDevice& device = *buffer->device;
        // On a lost device a release only releases the client side.
        if (!device.lost()) {
          if (Status ok =
                  forward<BufferDestroy>(device, BufferDestroy::In{WireHandle{buffer->wire}});
              !ok && ok.error().code != CALRT_DEVICE_LOST) {
            return ok;
          }
        }
        std::lock_guard lock(device.mutex);
        device.buffers.erase(buffer->id);
        return {};
      });
}

CalrtError* buffer_map(Calrt_Buffer_Map_Args* args) {
  return guarded(args, CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE, "Calrt_Buffer_Map_Args", [&]() -> Status {
    auto buffer = resolve_buffer(args->buffer, "buffer");
    if (!buffer) {
      return tl::unexpected(buffer.error());
    }
    auto in = wire_in<BufferMap>(*args);
    in.buffer = WireHandle{buffer->wire};
    ClientDevice& device = *buffer->device;
    {
      // An input holds what the client sent last; an output, what its last job's wait sent.
      std::lock_guard lock(device.mutex);
      const bool known =
          buffer->object->input || buffer->object->fetched.contains(args->tensor_index);
      if (known && may_hold(device)) {
        if (auto shadow = buffer->object->shadows.map_again(args->tensor_index)) {
          hold<BufferMap>(device, in);
          args->data = shadow->data();
          args->size_bytes = shadow->size();
          return {};
        }
      }
    }
    return forward<BufferMap>(*buffer->device, in, [&](const BufferMap::Out& out) -> Status {
      std::lock_guard lock(buffer->device->mutex);
      args->data = buffer->object->shadows.map(args->tensor_index, out.data);
      args->size_bytes = out.data.size();
      return {};
    });
  });
}

CalrtError* buffer_unmap(Calrt_Buffer_Unmap_Args* args) {
  return guarded(
      args, CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE, "Calrt_Buffer_Unmap_Args", [&]() -> Status {
        auto buffer = resolve_buffer(args->buffer, "buffer");
        if (!buffer) {
          return tl::unexpected(buffer.error());
        }
        ClientDevice& device = *buffer->device;
        if (device.lost()) {
          std::lock_guard lock(device.mutex);
          buffer->object->shadows.set_unmapped(args->tensor_index);
          return {};
        }
        BufferUnmap::In in;
        in.buffer = WireHandle{buffer->wire};
        in.tensor_index = args->tensor_index;
        {
          std::lock_guard lock(device.mutex);
          if (buffer->object->input) {
            if (auto bytes = buffer->object->shadows.unmapped_bytes(args->tensor_index)) {
              in.write_back = 1;
              in.data = std::move(*bytes);
            }
          }
          if (buffer->object->shadows.is_mapped(args->tensor_index) && may_hold(device)) {
            hold<BufferUnmap>(device, in);
            buffer->object->shadows.set_unmapped(args->tensor_index);
            return {};
          }
        }
        return forward<BufferUnmap>(device, in, [&](const BufferUnmap::Out&) -> Status {
          std::lock_guard lock(device.mutex);
          buffer->object->shadows.set_unmapped(args->tensor_index);
          return {};
        });
      });
}

CalrtError* buffer_set_csr(Calrt_Buffer_SetCsr_Args* args) {
  return guarded(args, CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE, "Calrt_Buffer_SetCsr_Args",
                 [&]() -> Status {
                   auto buffer = resolve_buffer(args->buffer, "buffer");
                   if (!buffer) {
                     return tl::unexpected(buffer.error());
                   }
                   auto in = wire_in<BufferSetCsr>(*args);
                   in.buffer = WireHandle{buffer->wire};
                   ClientDevice& device = *buffer->device;
                   {
                     std::lock_guard lock(device.mutex);
                     if (buffer->object->csrs_set.contains(args->csr_index) && may_hold(device)) {
                       hold<BufferSetCsr>(device, in);
                       return {};
                     }
                   }
                   return forward<BufferSetCsr>(device, in, [&](const BufferSetCsr::Out&) {
                     std::lock_guard lock(device.mutex);
                     buffer->object->csrs_set.insert(args->csr_index);
                     return Status{};
                   });
                 });
}

CalrtError* buffer_get_csr(Calrt_Buffer_GetCsr_Args* args) {
  return guarded(args, CALRT_BUFFER_GETCSR_ARGS_STRUCT_SIZE, "Calrt_Buffer_GetCsr_Args",
                 [&]() -> Status {
                   auto buffer = resolve_buffer(args->buffer, "buffer");
                   if (!buffer) {
                     return tl::unexpected(buffer.error());
                   }
                   auto in = wire_in<BufferGetCsr>(*args);
                   in.buffer = WireHandle{buffer->wire};
                   return forward<BufferGetCsr>(*buffer->device, in,
                                                [&](const BufferGetCsr::Out& out) -> Status {
                                                  fill_outs<BufferGetCsr>(out, *args);
                                                  return {};
                                                });
                 });
}

}  // namespace simdev::service::client
