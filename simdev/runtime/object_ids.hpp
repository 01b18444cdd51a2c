// Resolving a second handle inside a call that already holds its device: the handle must
// be of the right kind and belong to the same device.
#pragma once

#include "simdev/runtime/device_access.hpp"

namespace simdev::runtime {

inline Expected<ObjectId> same_device_id(const void* handle, HandleKind kind, const char* what,
                                         uint32_t device_index) {
  const auto decoded = decode_handle(reinterpret_cast<uintptr_t>(handle), kind);
  if (!decoded || decoded->first != device_index) {
    return fail(CALRT_INVALID_HANDLE, std::string(what) + " handle " + handle_text(handle) +
                                          " was released, never issued or is of another device");
  }
  return decoded->second;
}

}  // namespace simdev::runtime
