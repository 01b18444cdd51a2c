// device_host.hpp: the one simulated device the daemon shares between sessions. Created on
// the first attach (the daemon's config, then that client's keys on top), destroyed when the
// last session detaches so that the next client finds a fresh device. Used only from the
// device lane, so it needs no lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "abi/calrt.h"
#include "simdev/service/server/calls/sim_call.hpp"
#include "simdev/service/server/session/trace_demux.hpp"

namespace simdev::service::server {

struct SessionObjects;

// `key=value;key=value` as Device_Create takes it; later keys replace earlier ones.
using ConfigEntries = std::vector<std::pair<std::string, std::string>>;
ConfigEntries parse_config(const std::string& text);
// Keys of `top` replace those of `base`; new keys are appended in their order.
ConfigEntries merge_config(ConfigEntries base, const ConfigEntries& top);
std::string join_config(const ConfigEntries& entries);

class DeviceHost {
 public:
  DeviceHost(const CalrtApi* api, std::string daemon_config);
  ~DeviceHost();
  DeviceHost(const DeviceHost&) = delete;
  DeviceHost& operator=(const DeviceHost&) = delete;

  // Attaches one session; the first creates the device. A different config while the device
  // is shared is BUSY naming both.
  tl::expected<CalrtDevice*, Failure> attach(uint32_t kind_raw, uint32_t index,
                                             const std::optional<std::string>& client_config,
                                             uint64_t timeout_ns);
  // Detaches one session; the last one destroys the device.
  Failure detach();
  // Destroys the device whatever its users (daemon shutdown).
  void destroy_now();
  size_t users() const { return users_; }
  // The attached sessions' objects, so that a device-wide call of one session can mark what
  // it does to the others' work (a reset preempts their jobs).
  void join(SessionObjects* objects) { sessions_.push_back(objects); }
  void leave(SessionObjects* objects) { std::erase(sessions_, objects); }
  const std::vector<SessionObjects*>& sessions() const { return sessions_; }
  // The sessions' traces over the device's one recording.
  TraceDemux& trace() { return trace_; }
  // The device and its trace extension (ext NULL when the runtime has none).
  TraceDemux::Device trace_device() const;
  // Whether a job is in flight on the device; false when there is no device or its status
  // cannot be read (the request that asked then meets the error itself).
  bool running() const;
  // Whether the device runs the virtual clock, where an ordinary call runs no device events
  // (only a Job_Wait or a host spend does); on a paced clock every call first runs the events
  // due, a job's computation among them. It decides where calls may run: short calls on the
  // io thread, a batch's trailing wait on the device lane. Set at each Device_Create (the
  // device is shared, so every session sees the same clock); read by the io thread too.
  void set_virtual_clock(bool virtual_clock) { virtual_clock_.store(virtual_clock); }
  bool virtual_clock() const { return virtual_clock_.load(); }

 private:
  std::atomic<bool> virtual_clock_{false};
  const CalrtApi* api_;
  ConfigEntries daemon_config_;
  CalrtDevice* device_ = nullptr;
  size_t users_ = 0;
  std::vector<SessionObjects*> sessions_;
  TraceDemux trace_;
  uint32_t kind_raw_ = 0;
  uint32_t index_ = 0;
  std::string config_;     // as passed to Device_Create
  std::string canonical_;  // sorted by key, for comparing
};

}  // namespace simdev::service::server
