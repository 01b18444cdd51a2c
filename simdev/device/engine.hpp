// The virtual clock and the loop that advances it. Time moves only inside run_until(),
// which the device calls when the host waits; nothing here reads the wall clock.
#pragma once

#include <functional>

#include "simdev/device/event_queue.hpp"

namespace simdev {

class Engine {
 public:
  // Bounds one run: far above any legitimate workload, so hitting it means a bug.
  static constexpr uint64_t kMaxEventsPerRun = uint64_t{1} << 24;

  TimePs now() const { return now_ps_; }
  EventQueue& queue() { return queue_; }
  const EventQueue& queue() const { return queue_; }

  // Schedules an action delay_ps after now (latency is an argument of sending).
  Expected<EventKey> after(TimePs delay_ps, Band band, EventQueue::Action action) {
    return queue_.schedule(saturating_add(now_ps_, delay_ps), band, std::move(action));
  }

  // Fires events in order while their time is <= limit_ps, stopping early once done()
  // holds after an event. When not stopped early the clock lands on limit_ps (a wait that
  // times out consumes its whole timeout), unless limit_ps is kTimeNever.
  Status run_until(TimePs limit_ps, const std::function<bool()>& done);

  // Advances the clock with no events in between (e.g. a configure upload).
  void advance_to(TimePs time_ps) {
    if (time_ps > now_ps_) {
      now_ps_ = time_ps;
    }
  }

 private:
  TimePs now_ps_ = 0;
  EventQueue queue_;
};

}  // namespace simdev
