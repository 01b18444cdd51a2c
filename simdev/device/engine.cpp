#include "simdev/device/engine.hpp"

namespace simdev {

Status Engine::run_until(TimePs limit_ps, const std::function<bool()>& done) {
  for (uint64_t fired = 0; fired < kMaxEventsPerRun; ++fired) {
    if (done()) {
      return {};
    }
    const auto next = queue_.next_time();
    if (!next || *next > limit_ps) {
      if (limit_ps != kTimeNever) {
        advance_to(limit_ps);
      }
      return {};
    }
    auto event = queue_.pop();
    advance_to(event->first.time_ps);
    event->second();
  }
  return fail(CALRT_INTERNAL, "event loop exceeded its bound of " +
                                  std::to_string(kMaxEventsPerRun) + " events in one run");
}

}  // namespace simdev
