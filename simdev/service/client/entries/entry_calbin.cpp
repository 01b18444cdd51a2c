// Entries: loading, describing and configuring calbins. Strings the daemon returns are kept
// in the client's calbin, which owns them as the ABI says.
#include <algorithm>
#include <filesystem>

#include "simdev/service/client/entries/entry_points.hpp"
#include "simdev/service/client/entries/entry_support.hpp"

namespace simdev::service::client {

CalrtError* calbin_create(Calrt_Calbin_Create_Args* args) {
  return guarded(
      args, CALRT_CALBIN_CREATE_ARGS_STRUCT_SIZE, "Calrt_Calbin_Create_Args", [&]() -> Status {
        auto device = resolve_device(args->device, "device");
        if (!device) {
          return tl::unexpected(device.error());
        }
        CalbinCreate::In in;
        in.device = WireHandle{(*device)->wire_id()};
        in.timeout_ns = args->timeout_ns;
        if (args->path != nullptr) {
          // The daemon resolves nothing against its own working directory.
          std::error_code ec;
          const std::string path(args->path);
          const auto absolute =
              path.empty() ? std::filesystem::path() : std::filesystem::absolute(path, ec);
          in.path = ec ? path : absolute.string();
        }
        return forward<CalbinCreate>(**device, in, [&](const CalbinCreate::Out& out) -> Status {
          auto calbin = std::make_shared<ClientCalbin>();
          calbin->wire = out.calbin.id;
          calbin->path = in.path.value_or("");
          std::optional<LocalId> id;
          {
            std::lock_guard lock((*device)->mutex);
            id = (*device)->calbins.insert(calbin);
          }
          if (!id) {
            (void)round_trip<CalbinDestroy>(**device, CalbinDestroy::In{out.calbin});
            return fail(CALRT_OUT_OF_RANGE, "too many calbins on the device");
          }
          args->calbin = to_handle<CalrtCalbin>(HandleKind::kCalbin, (*device)->slot, *id);
          return {};
        });
      });
}

CalrtError* calbin_destroy(Calrt_Calbin_Destroy_Args* args) {
  return guarded(
      args, CALRT_CALBIN_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Calbin_Destroy_Args", [&]() -> Status {
        auto calbin = resolve_calbin(args->calbin, "calbin");
        if (!calbin) {
          return tl::unexpected(calbin.error());
        }
        ClientDevice& device = *calbin->device;
        // A release on a lost device (or of a calbin that could not be loaded again) only
        // releases the client side: there is nothing left on the daemon to release.
        if (!device.lost() && calbin->wire != 0) {
          if (Status ok =
                  forward<CalbinDestroy>(device, CalbinDestroy::In{WireHandle{calbin->wire}});
              !ok && ok.error().code != CALRT_DEVICE_LOST) {
            return ok;
          }
        }
        std::lock_guard lock(device.mutex);
        device.calbins.erase(calbin->id);
        return {};
      });
}

CalrtError* calbin_get_info(Calrt_Calbin_GetInfo_Args* args) {
  return guarded(args, CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetInfo_Args",
                 [&]() -> Status {
                   auto calbin = resolve_calbin(args->calbin, "calbin");
                   if (!calbin) {
                     return tl::unexpected(calbin.error());
                   }
                   return forward<CalbinGetInfo>(
                       *calbin->device, CalbinGetInfo::In{WireHandle{calbin->wire}},
                       [&](const CalbinGetInfo::Out& out) -> Status {
                         {
                           std::lock_guard lock(calbin->device->mutex);
                           args->calbin_version = calbin->object->strings.keep(out.calbin_version);
                           args->architecture = calbin->object->strings.keep(out.architecture);
                           args->runtime_abi = calbin->object->strings.keep(out.runtime_abi);
                         }
                         args->model_count = out.model_count;
                         args->chip_count = out.chip_count;
                         args->vocab = out.vocab;
                         args->context = out.context;
                         args->batch = out.batch;
                         args->layers = out.layers;
                         args->hidden = out.hidden;
                         args->q_heads = out.q_heads;
                         args->kv_heads = out.kv_heads;
                         args->head_dim = out.head_dim;
                         args->prefill_chunk = out.prefill_chunk;
                         args->kv_dtype = static_cast<CalrtDtype>(out.kv_dtype);
                         args->configured = out.configured;
                         return {};
                       });
                 });
}

CalrtError* calbin_get_model(Calrt_Calbin_GetModel_Args* args) {
  return guarded(args, CALRT_CALBIN_GETMODEL_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetModel_Args",
                 [&]() -> Status {
                   auto calbin = resolve_calbin(args->calbin, "calbin");
                   if (!calbin) {
                     return tl::unexpected(calbin.error());
                   }
                   CalbinGetModel::In in;
                   in.calbin = WireHandle{calbin->wire};
                   in.model_index = args->model_index;
                   return forward<CalbinGetModel>(
                       *calbin->device, in, [&](const CalbinGetModel::Out& out) -> Status {
                         {
                           std::lock_guard lock(calbin->device->mutex);
                           args->name = calbin->object->strings.keep(out.name);
                         }
                         args->type = static_cast<CalrtModelType>(out.type);
                         args->input_count = out.input_count;
                         args->output_count = out.output_count;
                         args->csr_count = out.csr_count;
                         return {};
                       });
                 });
}

CalrtError* calbin_get_tensor(Calrt_Calbin_GetTensor_Args* args) {
  return guarded(args, CALRT_CALBIN_GETTENSOR_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetTensor_Args",
                 [&]() -> Status {
                   auto calbin = resolve_calbin(args->calbin, "calbin");
                   if (!calbin) {
                     return tl::unexpected(calbin.error());
                   }
                   CalbinGetTensor::In in;
                   in.calbin = WireHandle{calbin->wire};
                   in.model_name = optional_string(args->model_name);
                   in.direction = wire_enum(args->direction);
                   in.index = args->index;
                   return forward<CalbinGetTensor>(
                       *calbin->device, in, [&](const CalbinGetTensor::Out& out) -> Status {
                         {
                           std::lock_guard lock(calbin->device->mutex);
                           args->name = calbin->object->strings.keep(out.name);
                         }
                         args->role = static_cast<CalrtTensorRole>(out.role);
                         args->dtype = static_cast<CalrtDtype>(out.dtype);
                         args->rank = out.rank;
                         std::copy(out.dims.begin(), out.dims.end(), std::begin(args->dims));
                         args->layout = static_cast<CalrtLayout>(out.layout);
                         args->tile_d0 = out.tile_d0;
                         args->size_bytes = out.size_bytes;
                         args->device_address = out.device_address;
                         args->chip_mask = out.chip_mask;
                         return {};
                       });
                 });
}

CalrtError* calbin_get_csr(Calrt_Calbin_GetCsr_Args* args) {
  return guarded(args, CALRT_CALBIN_GETCSR_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetCsr_Args",
                 [&]() -> Status {
                   auto calbin = resolve_calbin(args->calbin, "calbin");
                   if (!calbin) {
                     return tl::unexpected(calbin.error());
                   }
                   CalbinGetCsr::In in;
                   in.calbin = WireHandle{calbin->wire};
                   in.model_name = optional_string(args->model_name);
                   in.index = args->index;
                   return forward<CalbinGetCsr>(
                       *calbin->device, in, [&](const CalbinGetCsr::Out& out) -> Status {
                         {
                           std::lock_guard lock(calbin->device->mutex);
                           args->name = calbin->object->strings.keep(out.name);
                         }
                         args->address = out.address;
                         return {};
                       });
                 });
}

CalrtError* calbin_configure(Calrt_Calbin_Configure_Args* args) {
  return guarded(args, CALRT_CALBIN_CONFIGURE_ARGS_STRUCT_SIZE, "Calrt_Calbin_Configure_Args",
                 [&]() -> Status {
                   auto calbin = resolve_calbin(args->calbin, "calbin");
                   if (!calbin) {
                     return tl::unexpected(calbin.error());
                   }
                   CalbinConfigure::In in;
                   in.calbin = WireHandle{calbin->wire};
                   in.timeout_ns = args->timeout_ns;
                   return forward<CalbinConfigure>(
                       *calbin->device, in, [&](const CalbinConfigure::Out& out) -> Status {
                         args->configure_time_ns = out.configure_time_ns;
                         args->chip_count = out.chip_count;
                         std::copy(out.memory_used_bytes.begin(), out.memory_used_bytes.end(),
                                   std::begin(args->memory_used_bytes));
                         return {};
                       });
                 });
}

}  // namespace simdev::service::client
