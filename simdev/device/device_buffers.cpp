// Device: input/output buffers, their mappings and CSRs.
#include "simdev/device/device.hpp"

namespace simdev {
namespace {

std::string buffer_label(const Buffer& buffer) {
  return "buffer #" + std::to_string(buffer.serial);
}

}  // namespace

Status Device::check_owner(const Buffer& buffer, std::string_view action) const {
  if (buffer.owner_job) {
    return fail(CALRT_BUSY, "cannot " + std::string(action) + " " + buffer_label(buffer) +
                                ": it is owned by in-flight job #" +
                                std::to_string(buffer.owner_job_serial) +
                                " (touching it now is the buffer-reuse bug)");
  }
  return {};
}

Expected<ObjectId> Device::buffer_create(ObjectId calbin_id, std::string_view model_name,
                                         CalrtDirection direction, uint32_t slot) {
  auto found = configured_model(calbin_id, model_name, DeviceCall::kBufferCreate);
  if (!found) {
    return tl::unexpected(found.error());
  }
  const CalbinImage& image = *found->image;
  const size_t model_index = found->model_index;
  if (direction != CALRT_INPUT && direction != CALRT_OUTPUT) {
    return fail(CALRT_INVALID_ARGUMENT, "direction " + std::to_string(direction) + " is unknown");
  }
  if (slot > 1 || (slot == 1 && !parallel_mode_)) {
    return fail(CALRT_INVALID_ARGUMENT, "slot " + std::to_string(slot) + " is not allowed" +
                                            (parallel_mode_ ? "" : " outside parallel mode"));
  }
  const calbin::Model& model = image.manifest.models[model_index];
  const auto& tensors = direction == CALRT_INPUT ? model.inputs : model.outputs;
  auto buffer = std::make_unique<Buffer>();
  buffer->serial = next_serial_++;
  buffer->calbin = calbin_id;
  buffer->model_index = model_index;
  buffer->direction = direction;
  buffer->slot = slot;
  for (const auto& tensor : tensors) {
    buffer->tensors.emplace_back(tensor.bytes, uint8_t{0});
  }
  buffer->mapped.assign(tensors.size(), false);
  if (direction == CALRT_INPUT) {
    buffer->csrs.assign(model.csrs.size(), 0);
  }
  auto id = buffers_.insert(std::move(buffer));
  if (!id) {
    return fail(CALRT_OUT_OF_RANGE,
                "too many live buffers (limit " + std::to_string(kMaxBuffers) + ")");
  }
  return *id;
}

Status Device::buffer_destroy(ObjectId id) {
  if (auto allowed = require_allowed(DeviceCall::kBufferDestroy); !allowed) {
    return allowed;
  }
  auto buffer = find_buffer(id);
  if (!buffer) {
    return tl::unexpected(buffer.error());
  }
  if (auto free = check_owner(**buffer, "destroy"); !free) {
    return free;
  }
  tombstones_.bury(id, buffer_label(**buffer) + " was destroyed");
  buffers_.erase(id);
  return {};
}

Expected<Buffer*> Device::find_buffer_tensor(ObjectId id, uint32_t tensor_index) const {
  auto found = find_buffer(id);
  if (!found) {
    return found;
  }
  const Buffer& buffer = **found;
  if (tensor_index >= buffer.tensors.size()) {
    return fail(CALRT_OUT_OF_RANGE, buffer_label(buffer) + ": tensor index " +
                                        std::to_string(tensor_index) + " >= tensor count " +
                                        std::to_string(buffer.tensors.size()));
  }
  return found;
}

Expected<TensorMapping> Device::buffer_map(ObjectId id, uint32_t tensor_index) {
  if (auto allowed = require_allowed(DeviceCall::kBufferMap); !allowed) {
    return tl::unexpected(allowed.error());
  }
  auto found = find_buffer_tensor(id, tensor_index);
  if (!found) {
    return tl::unexpected(found.error());
  }
  Buffer& buffer = **found;
  if (auto free = check_owner(buffer, "map"); !free) {
    return tl::unexpected(free.error());
  }
  if (buffer.mapped[tensor_index]) {
    return fail(CALRT_BUSY, buffer_label(buffer) + ": tensor " + std::to_string(tensor_index) +
                                " is already mapped");
  }
  buffer.mapped[tensor_index] = true;
  auto& bytes = buffer.tensors[tensor_index];
  return TensorMapping{bytes.data(), bytes.size()};
}

Status Device::buffer_unmap(ObjectId id, uint32_t tensor_index) {
  if (auto allowed = require_allowed(DeviceCall::kBufferUnmap); !allowed) {
    return allowed;
  }
  auto found = find_buffer_tensor(id, tensor_index);
  if (!found) {
    return tl::unexpected(found.error());
  }
  Buffer& buffer = **found;
  if (!buffer.mapped[tensor_index]) {
    return fail(CALRT_WRONG_STATE, buffer_label(buffer) + ": tensor " +
                                       std::to_string(tensor_index) + " is not mapped");
  }
  buffer.mapped[tensor_index] = false;
  return {};
}

namespace {

Status check_csr_index(const Buffer& buffer, uint32_t csr_index) {
  if (buffer.direction != CALRT_INPUT) {
    return fail(CALRT_INVALID_ARGUMENT, buffer_label(buffer) +
                                            " is an output buffer; CSRs "
                                            "live in input buffers");
  }
  if (csr_index >= buffer.csrs.size()) {
    return fail(CALRT_OUT_OF_RANGE, buffer_label(buffer) + ": CSR index " +
                                        std::to_string(csr_index) + " >= CSR count " +
                                        std::to_string(buffer.csrs.size()));
  }
  return {};
}

}  // namespace

Status Device::buffer_set_csr(ObjectId id, uint32_t csr_index, uint64_t value) {
  if (auto allowed = require_allowed(DeviceCall::kBufferSetCsr); !allowed) {
    return allowed;
  }
  auto found = find_buffer(id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  if (auto ok = check_csr_index(**found, csr_index); !ok) {
    return ok;
  }
  if (auto free = check_owner(**found, "set a CSR of"); !free) {
    return free;
  }
  (*found)->csrs[csr_index] = value;
  return {};
}

Expected<uint64_t> Device::buffer_get_csr(ObjectId id, uint32_t csr_index) const {
  if (auto allowed = require_allowed(DeviceCall::kBufferGetCsr); !allowed) {
    return tl::unexpected(allowed.error());
  }
  auto found = find_buffer(id);
  if (!found) {
    return tl::unexpected(found.error());
  }
  if (auto ok = check_csr_index(**found, csr_index); !ok) {
    return tl::unexpected(ok.error());
  }
  return (*found)->csrs[csr_index];
}

}  // namespace simdev
