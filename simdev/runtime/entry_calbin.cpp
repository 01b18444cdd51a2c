// Entry points: loading, describing and configuring calbins.
#include <algorithm>

#include "simdev/runtime/device_access.hpp"
#include "simdev/runtime/entry_guard.hpp"
#include "simdev/runtime/entry_points.hpp"
#include "simdev/runtime/enum_conversion.hpp"

namespace simdev::runtime {
namespace {

// Runs fn(Device&, const CalbinImage&) for a calbin handle, when the device allows `call`.
template <class Fn>
Status with_calbin(CalrtCalbin* handle, DeviceCall call, Fn&& fn) {
  return with_handle(handle, HandleKind::kCalbin, "calbin",
                     [&](Device& device, ObjectId id, uint32_t) -> Status {
                       auto image = device.calbin(id, call);
                       if (!image) {
                         return tl::unexpected(image.error());
                       }
                       return fn(device, **image);
                     });
}

Expected<const calbin::Model*> model_by_name(const CalbinImage& image, const char* name) {
  if (name == nullptr) {
    return fail(CALRT_INVALID_ARGUMENT, "model_name is NULL");
  }
  const auto index = image.find_model(name);
  if (!index) {
    return fail(CALRT_NOT_FOUND, image.not_found_message(name));
  }
  return &image.manifest.models[*index];
}

void fill_info(Calrt_Calbin_GetInfo_Args* args, const CalbinImage& image) {
  const calbin::Manifest& m = image.manifest;
  args->calbin_version = m.calbin_version.c_str();
  args->architecture = m.architecture.c_str();
  args->runtime_abi = m.runtime_abi.c_str();
  args->model_count = static_cast<uint32_t>(m.models.size());
  args->chip_count = m.chips;
  args->vocab = m.llm.vocab;
  args->context = m.llm.context;
  args->batch = m.llm.batch;
  args->layers = m.llm.layers;
  args->hidden = m.llm.hidden;
  args->q_heads = m.llm.q_heads;
  args->kv_heads = m.llm.kv_heads;
  args->head_dim = m.llm.head_dim;
  args->prefill_chunk = m.llm.prefill_chunk;
  args->kv_dtype = to_abi(m.llm.k_dtype);
  args->configured = image.configured ? 1 : 0;
}

Status fill_tensor(Calrt_Calbin_GetTensor_Args* args, const calbin::Model& model) {
  const int64_t direction = raw_enum(args->direction);
  if (direction != CALRT_INPUT && direction != CALRT_OUTPUT) {
    return fail(CALRT_INVALID_ARGUMENT, "direction " + std::to_string(direction) + " is unknown");
  }
  const auto& tensors = args->direction == CALRT_INPUT ? model.inputs : model.outputs;
  if (args->index >= tensors.size()) {
    return fail(CALRT_OUT_OF_RANGE, "model \"" + model.name + "\": tensor index " +
                                        std::to_string(args->index) + " >= count " +
                                        std::to_string(tensors.size()));
  }
  const calbin::TensorDesc& t = tensors[args->index];
  args->name = t.name.c_str();
  args->role = to_abi(t.role);
  args->dtype = to_abi(t.dtype);
  args->rank = static_cast<uint32_t>(std::min<size_t>(t.shape.size(), CALRT_MAX_RANK));
  std::fill(std::begin(args->dims), std::end(args->dims), int64_t{0});
  std::copy_n(t.shape.begin(), args->rank, args->dims);
  args->layout = to_abi(t.layout.kind);
  args->tile_d0 = t.layout.kind == calbin::Layout::Kind::kTiled ? t.layout.tile_d0 : 0;
  args->size_bytes = t.bytes;
  args->device_address = t.address;
  args->chip_mask = t.chip_mask;
  return {};
}

}  // namespace

CalrtError* calbin_create(Calrt_Calbin_Create_Args* args) {
  return guarded(args, CALRT_CALBIN_CREATE_ARGS_STRUCT_SIZE, "Calrt_Calbin_Create_Args", [&] {
    return with_handle(args->device, HandleKind::kDevice, "device",
                       [&](Device& device, ObjectId, uint32_t index) -> Status {
                         if (args->path == nullptr) {
                           return fail(CALRT_INVALID_ARGUMENT, "calbin path is NULL");
                         }
                         auto id = device.calbin_create(args->path, args->timeout_ns);
                         if (!id) {
                           return tl::unexpected(id.error());
                         }
                         args->calbin = to_handle<CalrtCalbin>(HandleKind::kCalbin, index, *id);
                         return {};
                       });
  });
}

CalrtError* calbin_destroy(Calrt_Calbin_Destroy_Args* args) {
  return guarded(args, CALRT_CALBIN_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Calbin_Destroy_Args", [&] {
    return with_handle(
        args->calbin, HandleKind::kCalbin, "calbin",
        [&](Device& device, ObjectId id, uint32_t) -> Status { return device.calbin_destroy(id); });
  });
}

CalrtError* calbin_get_info(Calrt_Calbin_GetInfo_Args* args) {
  return guarded(args, CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetInfo_Args", [&] {
    return with_calbin(args->calbin, DeviceCall::kCalbinGetInfo,
                       [&](Device&, const CalbinImage& image) -> Status {
                         fill_info(args, image);
                         return {};
                       });
  });
}

CalrtError* calbin_get_model(Calrt_Calbin_GetModel_Args* args) {
  return guarded(args, CALRT_CALBIN_GETMODEL_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetModel_Args", [&] {
    return with_calbin(args->calbin, DeviceCall::kCalbinGetModel,
                       [&](Device&, const CalbinImage& image) -> Status {
                         const auto& models = image.manifest.models;
                         if (args->model_index >= models.size()) {
                           return fail(CALRT_OUT_OF_RANGE,
                                       "model index " + std::to_string(args->model_index) +
                                           " >= model count " + std::to_string(models.size()));
                         }
                         const calbin::Model& model = models[args->model_index];
                         args->name = model.name.c_str();
                         args->type = to_abi(model.type);
                         args->input_count = static_cast<uint32_t>(model.inputs.size());
                         args->output_count = static_cast<uint32_t>(model.outputs.size());
                         args->csr_count = static_cast<uint32_t>(model.csrs.size());
                         return {};
                       });
  });
}

CalrtError* calbin_get_tensor(Calrt_Calbin_GetTensor_Args* args) {
  return guarded(args, CALRT_CALBIN_GETTENSOR_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetTensor_Args", [&] {
    return with_calbin(args->calbin, DeviceCall::kCalbinGetTensor,
                       [&](Device&, const CalbinImage& image) -> Status {
                         auto model = model_by_name(image, args->model_name);
                         if (!model) {
                           return tl::unexpected(model.error());
                         }
                         return fill_tensor(args, **model);
                       });
  });
}

CalrtError* calbin_get_csr(Calrt_Calbin_GetCsr_Args* args) {
  return guarded(args, CALRT_CALBIN_GETCSR_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetCsr_Args", [&] {
    return with_calbin(
        args->calbin, DeviceCall::kCalbinGetCsr, [&](Device&, const CalbinImage& image) -> Status {
          auto model = model_by_name(image, args->model_name);
          if (!model) {
            return tl::unexpected(model.error());
          }
          const auto& csrs = (*model)->csrs;
          if (args->index >= csrs.size()) {
            return fail(CALRT_OUT_OF_RANGE, "model \"" + (*model)->name + "\": CSR index " +
                                                std::to_string(args->index) + " >= CSR count " +
                                                std::to_string(csrs.size()));
          }
          args->name = csrs[args->index].name.c_str();
          args->address = csrs[args->index].address;
          return {};
        });
  });
}

CalrtError* calbin_configure(Calrt_Calbin_Configure_Args* args) {
  return guarded(args, CALRT_CALBIN_CONFIGURE_ARGS_STRUCT_SIZE, "Calrt_Calbin_Configure_Args", [&] {
    return with_handle(args->calbin, HandleKind::kCalbin, "calbin",
                       [&](Device& device, ObjectId id, uint32_t) -> Status {
                         auto result = device.calbin_configure(id, args->timeout_ns);
                         if (!result) {
                           return tl::unexpected(result.error());
                         }
                         args->configure_time_ns = ps_to_ns(result->duration_ps);
                         const auto& used = result->memory_used_bytes;
                         args->chip_count = static_cast<uint32_t>(used.size());
                         std::fill(std::begin(args->memory_used_bytes),
                                   std::end(args->memory_used_bytes), uint64_t{0});
                         std::copy_n(used.begin(), std::min<size_t>(used.size(), CALRT_MAX_CHIPS),
                                     args->memory_used_bytes);
                         return {};
                       });
  });
}

}  // namespace simdev::runtime
