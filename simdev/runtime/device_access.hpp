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

// A paced wait's sleep: the device's lock is released while it sleeps, so other threads'
// calls proceed (and wake it); the device stays alive because closing waits for sleepers.
class EntrySleeper final : public Sleeper {
 public:
  EntrySleeper(DeviceEntry& entry, std::unique_lock<std::mutex>& lock)
      : entry_(entry), lock_(lock) {}

  bool sleep_until(std::chrono::steady_clock::time_point deadline) override {
    if (entry_.closing) {
      return false;
    }
    ++entry_.sleepers;
    entry_.wake.wait_until(lock_, deadline);
    --entry_.sleepers;
    if (entry_.closing) {
      entry_.wake.notify_all();  // the closer waits for the last sleeper to leave
      return false;
    }
    return true;
  }

 private:
  DeviceEntry& entry_;
  std::unique_lock<std::mutex>& lock_;
};

// Runs fn(Device&, ObjectId object, uint32_t device_index, Sleeper&) with the device
// locked; in paced mode the device's clock is caught up first and sleepers are woken after.
template <class Fn>
auto with_handle_sleeper(const void* handle, HandleKind kind, const char* what, Fn&& fn)
    -> decltype(fn(std::declval<Device&>(), ObjectId{}, uint32_t{}, std::declval<Sleeper&>())) {
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
  std::unique_lock lock(entry->mutex);
  if (!entry->device || entry->closing) {
    return fail(CALRT_INVALID_HANDLE, std::string(what) + " handle " + handle_text(handle) +
                                          ": its device was destroyed");
  }
  Device& device = *entry->device;
  if (!device.paced()) {
    EntrySleeper sleeper(*entry, lock);
    return fn(device, decoded->second, entry->index, sleeper);
  }
  if (auto caught_up = device.catch_up(); !caught_up) {
    return tl::unexpected(caught_up.error());
  }
  EntrySleeper sleeper(*entry, lock);
  auto result = fn(device, decoded->second, entry->index, sleeper);
  // Unlocked first: a sleeper woken while this thread still held the mutex would only block
  // on it again (a second context switch per wake-up). `entry` keeps the condition variable
  // alive, and a sleeper rechecks the device under the mutex whatever woke it.
  lock.unlock();
  entry->wake.notify_all();
  return result;
}

// The same for calls that never sleep: fn(Device&, ObjectId object, uint32_t device_index).
template <class Fn>
auto with_handle(const void* handle, HandleKind kind, const char* what, Fn&& fn)
    -> decltype(fn(std::declval<Device&>(), ObjectId{}, uint32_t{})) {
  return with_handle_sleeper(handle, kind, what,
                             [&](Device& device, ObjectId object, uint32_t index, Sleeper&) {
                               return fn(device, object, index);
                             });
}

}  // namespace simdev::runtime
