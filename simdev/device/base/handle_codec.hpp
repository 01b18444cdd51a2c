// Opaque ABI handles are numbers, never pointers to memory: kind (4 bits), device slot
// (8 bits), object index (20 bits) and generation (32 bits) packed into the pointer value.
// The in-process runtime (simdev/runtime/handles.hpp) and the client runtime
// (simdev/service/client/objects/client_handles.hpp) both pack theirs here. Decoding checks the
// kind and that a generation is present; the owner's table then checks index and generation, so a
// freed, double-freed or forged handle is rejected with CALRT_INVALID_HANDLE and never
// dereferenced. Header-only, so that the client shares it without linking the device.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

namespace simdev {

enum class HandleKind : uint32_t { kDevice = 1, kCalbin = 2, kBuffer = 3, kJob = 4, kKv = 5 };

// An object's id in its table: the index, and the generation its slot had when the object
// was stored (0 is never issued).
struct ObjectId {
  uint32_t index = 0;
  uint32_t generation = 0;
  friend bool operator==(const ObjectId&, const ObjectId&) = default;
};

inline constexpr uint32_t kMaxDevices = 256;       // device slots: the slot field's 8 bits
inline constexpr uint32_t kMaxObjects = 1u << 20;  // objects of one kind: the index's 20 bits

namespace handle_bits {
inline constexpr unsigned kKindShift = 60;
inline constexpr unsigned kDeviceShift = 52;
inline constexpr unsigned kIndexShift = 32;
inline constexpr uint64_t kDeviceMask = kMaxDevices - 1;
inline constexpr uint64_t kIndexMask = kMaxObjects - 1;
}  // namespace handle_bits

static_assert(sizeof(uintptr_t) == 8, "handles pack 64 bits into a pointer value");

constexpr uintptr_t encode_handle(HandleKind kind, uint32_t device_slot, ObjectId id) {
  using namespace handle_bits;
  return (uint64_t{static_cast<uint32_t>(kind)} << kKindShift) |
         ((uint64_t{device_slot} & kDeviceMask) << kDeviceShift) |
         ((uint64_t{id.index} & kIndexMask) << kIndexShift) | id.generation;
}

// The device slot and the object's id, or nullopt when the value cannot be a handle of that
// kind.
constexpr std::optional<std::pair<uint32_t, ObjectId>> decode_handle(uintptr_t value,
                                                                     HandleKind kind) {
  using namespace handle_bits;
  const uint64_t bits = value;
  if ((bits >> kKindShift) != static_cast<uint32_t>(kind)) {
    return std::nullopt;
  }
  const auto device_slot = static_cast<uint32_t>((bits >> kDeviceShift) & kDeviceMask);
  const ObjectId id{static_cast<uint32_t>((bits >> kIndexShift) & kIndexMask),
                    static_cast<uint32_t>(bits & 0xFFFFFFFFu)};
  if (id.generation == 0) {
    return std::nullopt;
  }
  return std::make_pair(device_slot, id);
}

template <class Handle>
Handle* to_handle(HandleKind kind, uint32_t device_slot, ObjectId id) {
  return reinterpret_cast<Handle*>(encode_handle(kind, device_slot, id));
}

}  // namespace simdev
