#include "simdev/service/server/session/quiet_point.hpp"

#include <utility>

namespace simdev::service::server {

bool QuietPointQueue::needs_quiet(Run run, Clock::time_point deadline) {
  if (waiting_.empty() && is_quiet_()) {
    run();
    return false;
  }
  ++waited_total_;
  waiting_.push_back(Waiting{std::move(run), true, deadline});
  waiting_count_.store(waiting_.size(), std::memory_order_relaxed);
  return true;
}

void QuietPointQueue::makes_busy(Run run) {
  if (waiting_.empty()) {
    run();
    return;
  }
  waiting_.push_back(Waiting{std::move(run), false, {}});
  waiting_count_.store(waiting_.size(), std::memory_order_relaxed);
}

void QuietPointQueue::poll(Clock::time_point now) {
  while (!waiting_.empty()) {
    Waiting& head = waiting_.front();
    if (head.needs_quiet && !is_quiet_()) {
      if (now < head.deadline) return;
      ++timed_out_total_;
    }
    // Popped before it runs: the run may post more work, never re-enter this queue.
    Run run = std::move(head.run);
    waiting_.pop_front();
    waiting_count_.store(waiting_.size(), std::memory_order_relaxed);
    run();
  }
}

void QuietPointQueue::flush() { poll(Clock::time_point::max()); }

}  // namespace simdev::service::server
