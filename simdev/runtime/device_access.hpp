// Resolving an ABI handle to its device under the device's mutex: every entry point that
// takes a handle goes through here, so calls on one device are serialised and a stale or
// forged handle becomes CALRT_INVALID_HANDLE before anything is touched.
#pragma once

#include <cstdio>
#include <string>

#include "simdev/runtime/handles.hpp"

namespace simdev::runtime {

inline std::string handle_text(const void* handle) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", handle);
  return text;
}

// Runs fn(Device&, ObjectId object, uint32_t device_index) with the device locked.
template <class Fn>
auto with_handle(const void* handle, HandleKind kind, const char* what, Fn&& fn)
    -> decltype(fn(std::declval<Device&>(), ObjectId{}, uint32_t{})) {
  const auto decoded = decode_handle(reinterpret_cast<uintptr_t>(handle), kind);
  std::shared_ptr<DeviceEntry> entry;
  if (decoded) {
    entry = kind == HandleKind::kDevice
                ? find_device(decoded->second.index, decoded->second.generation)
                : find_device_at(decoded->first);
  }
  if (!entry) {
    return fail(CALRT_INVALID_HANDLE, std::string(what) + " handle " + handle_text(handle) +
                                          " was released or never issued");
  }
  std::lock_guard lock(entry->mutex);
  if (!entry->device) {
    return fail(CALRT_INVALID_HANDLE, std::string(what) + " handle " + handle_text(handle) +
                                          ": its device was destroyed");
  }
  return fn(*entry->device, decoded->second, entry->index);
}

}  // namespace simdev::runtime
