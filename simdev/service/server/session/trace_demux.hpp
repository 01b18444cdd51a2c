// Per-session traces over the device's one recording (PROTOCOL.md, "Security model"). The
// trace extension records device-wide and Trace_Read moves what was recorded, so a session
// reading it directly would take, and see, every other session's events. The daemon instead
// keeps the device recording while any session records, drains it on every session's read,
// and hands each event to the session whose job it belongs to (the job serial, which the
// device numbers from 1 in submission order); events of no job (serial 0) go to every
// recording session. A session sees its own jobs only, and its Trace_Enable restarts its own
// recording, not the others'. Device lane only.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "abi/calrt_ext.h"
#include "simdev/service/protocol.hpp"
#include "simdev/service/server/calls/sim_call.hpp"

namespace simdev::service::server {

class TraceDemux {
 public:
  // What one session may keep unread: a bound on the daemon's memory per session (about
  // 72 MB) whatever capacity the session asks for; beyond it events are counted as dropped.
  static constexpr uint64_t kMaxSessionEvents = uint64_t{1} << 20;

  struct Device {
    const CalrtApi* api = nullptr;
    const CalrtTraceExtension* ext = nullptr;
    CalrtDevice* device = nullptr;
  };

  // A new device: its job serials start again from 1.
  void device_created();
  // Job_Submit of `session` succeeded: the device's next serial is that job's.
  void job_submitted(uint64_t session);

  Failure enable(const Device& d, uint64_t session, bool on, uint64_t capacity);
  Failure read(const Device& d, uint64_t session, uint64_t capacity,
               std::vector<WireTraceEvent>& out, uint64_t& dropped);
  // The session is gone: its events are dropped, and the device stops recording when no
  // session records.
  void leave(const Device& d, uint64_t session);

 private:
  struct Queue {
    bool recording = false;
    uint64_t capacity = 0;
    uint64_t dropped = 0;
    std::deque<CalrtTraceEvent> events;
  };

  Failure drain(const Device& d);
  void deliver(Queue& queue, const CalrtTraceEvent& event);
  bool any_recording() const;
  Failure stop_device(const Device& d);

  std::map<uint64_t, Queue> queues_;
  std::map<uint64_t, uint64_t> owners_;  // job serial -> session, while the device records
  uint64_t next_serial_ = 1;
  bool device_recording_ = false;
  uint64_t device_capacity_ = 0;
  uint64_t device_dropped_ = 0;  // the device's count at the last drain
};

}  // namespace simdev::service::server
