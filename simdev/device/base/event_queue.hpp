// The discrete-event queue: a strict total order on (time, priority band, insertion
// sequence), so that two events at the same instant always fire in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include "simdev/device/base/sim_time.hpp"
#include "simdev/device/base/status.hpp"

namespace simdev {

// Priority bands: at equal time a lower band fires first. Completions free the pipeline
// before queued starts look at it; host-visible bookkeeping comes last.
enum class Band : uint32_t {
  kFault = 0,
  kJobComplete = 1,
  kJobStart = 2,
  kHost = 3,
};

struct EventKey {
  TimePs time_ps = 0;
  Band band = Band::kHost;
  uint64_t sequence = 0;
  friend bool operator<(const EventKey& a, const EventKey& b) {
    return std::tie(a.time_ps, a.band, a.sequence) < std::tie(b.time_ps, b.band, b.sequence);
  }
};

class EventQueue {
 public:
  using Action = std::function<void()>;
  // Bounds the queue: a runaway producer fails loudly instead of eating memory.
  static constexpr size_t kCapacity = size_t{1} << 16;

  Expected<EventKey> schedule(TimePs time_ps, Band band, Action action);
  // Removes a pending event; false when it already fired or was cancelled.
  bool cancel(const EventKey& key);
  std::optional<TimePs> next_time() const;
  // Removes and returns the earliest event's action (with its key), nullopt when empty.
  std::optional<std::pair<EventKey, Action>> pop();
  void clear() { events_.clear(); }

  size_t size() const { return events_.size(); }
  size_t max_depth() const { return max_depth_; }

 private:
  std::map<EventKey, Action> events_;
  uint64_t next_sequence_ = 0;
  size_t max_depth_ = 0;
};

}  // namespace simdev
