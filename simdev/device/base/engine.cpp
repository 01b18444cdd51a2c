#include "simdev/device/base/engine.hpp"

#include <algorithm>
#include <thread>

namespace simdev {

void Engine::set_paced(bool paced) {
  paced_ = paced;
  if (paced) {
    origin_ = std::chrono::steady_clock::now() -
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::nanoseconds(ps_to_ns(now_ps_)));
  }
}

TimePs Engine::wall_now_ps() const {
  const auto elapsed = std::chrono::steady_clock::now() - origin_;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count();
  const TimePs wall = ns_to_ps(static_cast<uint64_t>(std::max<int64_t>(ns, 0)));
  return std::max(wall, now_ps_);
}

Engine::SteadyTime Engine::wall_time_of(TimePs time_ps) const {
  // Rounded up, so that a sleeper never wakes before the event is due.
  const uint64_t ns = time_ps / kPsPerNs + (time_ps % kPsPerNs != 0 ? 1 : 0);
  return origin_ +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::nanoseconds(
             static_cast<int64_t>(std::min<uint64_t>(ns, uint64_t{INT64_MAX} / 2))));
}

Status Engine::run_until(TimePs limit_ps, const std::function<bool()>& done, Sleeper* sleeper) {
  for (uint64_t step = 0; step < kMaxEventsPerRun; ++step) {
    if (done()) {
      return {};
    }
    const TimePs horizon = paced_ ? std::min(wall_now_ps(), limit_ps) : limit_ps;
    const auto next = queue_.next_time();
    if (next && *next <= horizon) {
      auto event = queue_.pop();
      advance_to(event->first.time_ps);
      event->second();
      continue;
    }
    if (!paced_ || horizon >= limit_ps || (!next && limit_ps == kTimeNever)) {
      if (limit_ps != kTimeNever) {
        advance_to(horizon);
      }
      return {};
    }
    // Paced and nothing due yet: sleep until the next event or the limit, whichever is
    // first; a notification (another thread's call) wakes the loop to look again.
    advance_to(horizon);
    const SteadyTime wake = wall_time_of(next ? std::min(*next, limit_ps) : limit_ps);
    if (sleeper != nullptr) {
      if (!sleeper->sleep_until(wake)) {
        return fail(CALRT_INVALID_HANDLE, "the device was destroyed during the wait");
      }
    } else {
      std::this_thread::sleep_until(wake);
    }
  }
  return fail(CALRT_INTERNAL, "event loop exceeded its bound of " +
                                  std::to_string(kMaxEventsPerRun) + " steps in one run");
}

Status Engine::catch_up() {
  if (!paced_) {
    return {};
  }
  return run_until(wall_now_ps(), [] { return false; });
}

}  // namespace simdev
