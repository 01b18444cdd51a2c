#include "simdev/device/base/event_queue.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace simdev {

Expected<EventKey> EventQueue::schedule(TimePs time_ps, Band band, Action action) {
  if (events_.size() >= kCapacity) {
    return fail(CALRT_INTERNAL,
                "event queue full (" + std::to_string(kCapacity) + " pending events)");
  }
  const EventKey key{time_ps, band, next_sequence_++};
  events_.emplace(key, std::move(action));
  max_depth_ = std::max(max_depth_, events_.size());
  return key;
}

bool EventQueue::cancel(const EventKey& key) { return events_.erase(key) > 0; }

std::optional<TimePs> EventQueue::next_time() const {
  if (events_.empty()) {
    return std::nullopt;
  }
  return events_.begin()->first.time_ps;
}

std::optional<std::pair<EventKey, EventQueue::Action>> EventQueue::pop() {
  if (events_.empty()) {
    return std::nullopt;
  }
  auto node = events_.extract(events_.begin());
  return std::make_pair(node.key(), std::move(node.mapped()));
}

}  // namespace simdev
