// The virtual clock and the loop that advances it. Time moves only inside run_until(),
// which the device calls when the host waits. In the default (virtual) mode nothing here
// reads the wall clock. In paced mode, an opt-in for demos and for measuring how a waiter
// wakes, device time follows the host's monotonic clock: run_until() sleeps until the next
// event is due, through a Sleeper that lets other threads' calls in meanwhile.
#pragma once

#include <chrono>
#include <functional>

#include "simdev/device/base/event_queue.hpp"
#include "simdev/device/base/invariants.hpp"

namespace simdev {

// How a paced wait sleeps. The runtime implements it by waiting on a condition variable
// with the device's lock released, so a call from another thread (a cancel, a submit) can
// run and wake the sleeper early.
class Sleeper {
 public:
  virtual ~Sleeper() = default;
  // Blocks until `deadline` or a notification. False when the device is being destroyed:
  // the caller must then return at once.
  virtual bool sleep_until(std::chrono::steady_clock::time_point deadline) = 0;
};

class Engine {
 public:
  // Bounds one run: far above any legitimate workload, so hitting it means a bug.
  static constexpr uint64_t kMaxEventsPerRun = uint64_t{1} << 24;

  TimePs now() const { return now_ps_; }
  // The device's invariant checks (invariants.hpp), kept with its clock.
  Invariants& invariants() { return invariants_; }
  const Invariants& invariants() const { return invariants_; }
  EventQueue& queue() { return queue_; }
  const EventQueue& queue() const { return queue_; }

  // Switches pacing on or off; the clock continues from where it is either way.
  void set_paced(bool paced);
  bool paced() const { return paced_; }

  // Schedules an action delay_ps after now (latency is an argument of sending).
  Expected<EventKey> after(TimePs delay_ps, Band band, EventQueue::Action action) {
    return queue_.schedule(saturating_add(now_ps_, delay_ps), band, std::move(action));
  }

  // Fires events in order while their time is <= limit_ps, stopping early once done()
  // holds after an event. When not stopped early the clock lands on limit_ps (a wait that
  // times out consumes its whole timeout), unless limit_ps is kTimeNever, in which case the
  // run ends when no event is left. Paced: events fire when the wall clock reaches them;
  // between them the call sleeps (sleeper, or the thread when there is none).
  Status run_until(TimePs limit_ps, const std::function<bool()>& done, Sleeper* sleeper = nullptr);

  // Paced: fires every event already due by the wall clock. Virtual: nothing.
  Status catch_up();

  // Advances the clock with no events in between (e.g. a configure upload).
  void advance_to(TimePs time_ps) {
    if (time_ps > now_ps_) {
      now_ps_ = time_ps;
    }
  }

 private:
  using SteadyTime = std::chrono::steady_clock::time_point;
  TimePs wall_now_ps() const;
  SteadyTime wall_time_of(TimePs time_ps) const;

  TimePs now_ps_ = 0;
  Invariants invariants_;
  EventQueue queue_;
  bool paced_ = false;
  SteadyTime origin_{};  // paced: the wall time at which the device clock read 0
};

}  // namespace simdev
