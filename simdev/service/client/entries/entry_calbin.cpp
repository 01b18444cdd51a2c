// Entries: loading, describing and configuring calbins. Strings the daemon returns are kept
// in the client's calbin, which owns them as the ABI says.
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
        auto in = wire_in<CalbinCreate>(*args);
        in.device = WireHandle{(*device)->wire_id()};
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
                         std::lock_guard lock(calbin->device->mutex);
                         fill_outs<CalbinGetInfo>(out, *args, calbin->object->strings);
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
                   auto in = wire_in<CalbinGetModel>(*args);
                   in.calbin = WireHandle{calbin->wire};
                   return forward<CalbinGetModel>(
                       *calbin->device, in, [&](const CalbinGetModel::Out& out) -> Status {
                         std::lock_guard lock(calbin->device->mutex);
                         fill_outs<CalbinGetModel>(out, *args, calbin->object->strings);
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
                   auto in = wire_in<CalbinGetTensor>(*args);
                   in.calbin = WireHandle{calbin->wire};
                   return forward<CalbinGetTensor>(
                       *calbin->device, in, [&](const CalbinGetTensor::Out& out) -> Status {
                         std::lock_guard lock(calbin->device->mutex);
                         fill_outs<CalbinGetTensor>(out, *args, calbin->object->strings);
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
                   auto in = wire_in<CalbinGetCsr>(*args);
                   in.calbin = WireHandle{calbin->wire};
                   return forward<CalbinGetCsr>(
                       *calbin->device, in, [&](const CalbinGetCsr::Out& out) -> Status {
                         std::lock_guard lock(calbin->device->mutex);
                         fill_outs<CalbinGetCsr>(out, *args, calbin->object->strings);
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
                   auto in = wire_in<CalbinConfigure>(*args);
                   in.calbin = WireHandle{calbin->wire};
                   return forward<CalbinConfigure>(*calbin->device, in,
                                                   [&](const CalbinConfigure::Out& out) -> Status {
                                                     fill_outs<CalbinConfigure>(out, *args);
                                                     return {};
                                                   });
                 });
}

}  // namespace simdev::service::client
