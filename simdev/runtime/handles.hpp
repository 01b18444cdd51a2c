// The in-process runtime's open devices. Handles pack a device's registry slot and an
// object's id inside the device (simdev/device/base/handle_codec.hpp); decoding checks the
// kind, and the device's registry and tables check the generations, so a freed,
// double-freed or forged handle is rejected with CALRT_INVALID_HANDLE and never dereferenced.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "simdev/device/base/handle_codec.hpp"
#include "simdev/device/base/handle_table.hpp"
#include "simdev/device/device.hpp"

namespace simdev::runtime {

// One open device: the mutex serialises every call on it. A paced wait sleeps on `wake`
// with the mutex released; every call notifies it, and closing tells sleepers to leave.
struct DeviceEntry {
  std::mutex mutex;
  std::condition_variable wake;
  uint32_t sleepers = 0;
  bool closing = false;
  std::unique_ptr<Device> device;  // null once destroyed
  uint32_t index = 0;              // registry slot, packed into every handle of the device
};

// Registers a device; nullopt when kMaxDevices are open.
std::optional<std::pair<ObjectId, std::shared_ptr<DeviceEntry>>> register_device(
    std::unique_ptr<Device> device);
// Looks a device up by its registry id (index from the handle, generation checked).
std::shared_ptr<DeviceEntry> find_device(uint32_t index, uint32_t generation);
// The device currently in registry slot index (object handles carry only the slot; their
// own generation check inside the device rejects handles of an earlier device).
std::shared_ptr<DeviceEntry> find_device_at(uint32_t index);
// Removes a device from the registry; the caller then tears it down under its mutex.
std::shared_ptr<DeviceEntry> unregister_device(uint32_t index, uint32_t generation);

}  // namespace simdev::runtime
