// The discrete-event queue: a strict total order on (time, priority band, insertion
// sequence), so that two events at the same instant always fire in the same order. A 4-ary
// heap of 16-byte keys over a pool of actions: a sift moves small keys, never an action; a
// node's four children share one cache line, so a pop touches half the lines a binary heap
// does; and nothing is allocated per event once the pool has grown
// (benchmarks/engine_bench.cpp measures it). A cancelled event stays in the heap, marked,
// until it reaches the top; cancelling is rare (a job cancelled or failed with an event
// pending), so finding it by a scan is too.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <tuple>
#include <vector>

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
  // Sequences a queue can issue: a node packs band, sequence and slot into 64 bits. At ten
  // million events a second that is 81 days of one device's simulation; past it, schedule
  // fails rather than misorder.
  static constexpr uint64_t kMaxSequence = (uint64_t{1} << 46) - 1;

  EventQueue() = default;
  // Sequences start at first_sequence: a test starts near kMaxSequence to see the end.
  explicit EventQueue(uint64_t first_sequence) : next_sequence_(first_sequence) {}

  Expected<EventKey> schedule(TimePs time_ps, Band band, Action action);
  // Removes a pending event; false when it already fired or was cancelled.
  bool cancel(const EventKey& key);
  std::optional<TimePs> next_time() const;
  // Removes and returns the earliest event's action (with its key), nullopt when empty.
  std::optional<std::pair<EventKey, Action>> pop();
  void clear() {
    heap_.clear();
    actions_.clear();
    slot_sequence_.clear();
    free_slots_.clear();
    live_ = 0;
  }

  size_t size() const { return live_; }  // pending events, cancelled ones not counted
  size_t max_depth() const { return max_depth_; }

 private:
  // band (2 bits) | sequence (46) | slot (16): comparing `order` compares band, then
  // sequence; the slot (its action in actions_) never decides, sequences being unique.
  struct Node {
    TimePs time_ps;
    uint64_t order;
    friend bool operator<(const Node& a, const Node& b) {
      return a.time_ps < b.time_ps || (a.time_ps == b.time_ps && a.order < b.order);
    }
    uint32_t slot() const { return static_cast<uint32_t>(order & 0xffff); }
    EventKey key() const;
  };
  static constexpr uint64_t kCancelled = ~uint64_t{0};
  static constexpr size_t kArity = 4;
  // Drops cancelled events from the top, so that the top is the next to fire.
  void drop_cancelled_top();
  void release(uint32_t slot);
  // Removes every cancelled event: when they would otherwise hold the queue at capacity.
  void compact();
  void sift_up(size_t at, Node node);
  void sift_down(size_t at, Node node);
  void pop_top();

  std::vector<Node> heap_;  // a min-heap on (time_ps, order)
  std::vector<Action> actions_;
  std::vector<uint64_t> slot_sequence_;  // the sequence of the event in each slot, or kCancelled
  std::vector<uint32_t> free_slots_;
  size_t live_ = 0;
  uint64_t next_sequence_ = 0;
  size_t max_depth_ = 0;
};

}  // namespace simdev
