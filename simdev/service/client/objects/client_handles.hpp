// Client handles are numbers, never pointers: a device slot and a local id packed by the
// simulator's codec (simdev/device/base/handle_codec.hpp). Generations come from one
// process-wide counter, so a handle of a destroyed device never matches an object of the
// device that later takes its slot. Decoding checks kind, slot, index and generation against
// the tables before anything is touched, so NULL, forged, released and other-device handles
// are INVALID_HANDLE without a round trip.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "simdev/device/base/handle_codec.hpp"
#include "simdev/device/base/handle_table.hpp"

namespace simdev::service::client {

// An object's id in its device's table of that kind.
using LocalId = ObjectId;

std::string handle_text(const void* handle);

// Objects of one kind of one device, by local id: the simulator's table, holding shared
// pointers (a call keeps its object alive while it uses it) and leaving index 0 to the device
// handle. Not thread-safe: the device's mutex guards it.
template <class T>
class ObjectTable : public HandleTable<T, std::shared_ptr<T>> {
 public:
  ObjectTable() : HandleTable<T, std::shared_ptr<T>>(kMaxObjects, nullptr, 1) {}
};

struct ClientDevice;

// The process's open client devices.
std::optional<LocalId> register_device(std::shared_ptr<ClientDevice> device, uint32_t* slot);
std::shared_ptr<ClientDevice> find_device(uint32_t slot, uint32_t generation);
// The device in a slot, whatever its generation (object handles carry only the slot).
std::shared_ptr<ClientDevice> find_device_at(uint32_t slot);
std::shared_ptr<ClientDevice> unregister_device(uint32_t slot, uint32_t generation);

}  // namespace simdev::service::client
