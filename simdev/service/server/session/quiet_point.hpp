// quiet_point.hpp: Calbin_Configure needs a device with no job in flight (the slot layout
// and device memory must not change under running jobs; simdev/device/STATE_MACHINE.md).
// In process, a RUNNING device means the caller's own jobs are in flight, and WRONG_STATE is
// the right answer. In the daemon it usually means another session's jobs are: a client that
// joins late must not fail for that. Its configure waits here, bounded, for a quiet point.
//
// While a configure waits, new Job_Submit requests queue behind it: otherwise sessions that
// keep submitting would never leave the device quiet. Jobs already in flight finish as their
// owners wait for them (their Job_Wait runs on their own wait lane, not here), the device
// turns CONFIGURED, the configure runs, then the held submits in arrival order. A wait that
// reaches its bound runs the configure anyway, which then fails WRONG_STATE with the reason.
//
// Device lane only: no lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>

namespace simdev::service::server {

class QuietPointQueue {
 public:
  using Clock = std::chrono::steady_clock;
  // Runs the request and delivers its outcome.
  using Run = std::function<void()>;
  // Whether the device has no job in flight now.
  using IsQuiet = std::function<bool()>;

  explicit QuietPointQueue(IsQuiet is_quiet) : is_quiet_(std::move(is_quiet)) {}

  // A request that needs a quiet device: runs now if the device is quiet and nothing waits,
  // else waits until `deadline`. Returns true when it had to wait (the caller arms a timer
  // that calls poll() at the deadline).
  bool needs_quiet(Run run, Clock::time_point deadline);
  // A request that makes the device busy (Job_Submit): runs now unless a configure waits,
  // then it runs after that configure.
  void makes_busy(Run run);
  // Something may have made the device quiet, or a deadline passed: runs what may run, in
  // arrival order.
  void poll(Clock::time_point now);
  // The daemon is stopping: runs everything that waits, whatever the device's state.
  void flush();

  // Readable from any thread: lets a wait lane skip posting a poll when nothing waits.
  bool has_waiting() const { return waiting_count_.load(std::memory_order_relaxed) > 0; }
  uint64_t waited_total() const { return waited_total_; }
  uint64_t timed_out_total() const { return timed_out_total_; }

 private:
  struct Waiting {
    Run run;
    bool needs_quiet = false;
    Clock::time_point deadline{};
  };

  IsQuiet is_quiet_;
  std::deque<Waiting> waiting_;
  std::atomic<size_t> waiting_count_{0};
  uint64_t waited_total_ = 0;
  uint64_t timed_out_total_ = 0;
};

}  // namespace simdev::service::server
