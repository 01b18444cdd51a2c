#include "simdev/device/base/event_queue.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace simdev {
namespace {

// The heap's order: std::push_heap keeps the greatest on top, so "greater" is "fires later".
struct Later {
  template <class N>
  bool operator()(const N& a, const N& b) const {
    return b.key < a.key;
  }
};

}  // namespace

Expected<EventKey> EventQueue::schedule(TimePs time_ps, Band band, Action action) {
  if (heap_.size() >= kCapacity && heap_.size() > live_) {
    compact();
  }
  if (heap_.size() >= kCapacity) {
    return fail(CALRT_INTERNAL,
                "event queue full (" + std::to_string(kCapacity) + " pending events)");
  }
  const EventKey key{time_ps, band, next_sequence_++};
  uint32_t slot = 0;
  if (free_slots_.empty()) {
    slot = static_cast<uint32_t>(actions_.size());
    actions_.push_back(std::move(action));
    slot_sequence_.push_back(key.sequence);
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    actions_[slot] = std::move(action);
    slot_sequence_[slot] = key.sequence;
  }
  heap_.push_back(Node{key, slot});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
  ++live_;
  max_depth_ = std::max(max_depth_, live_);
  return key;
}

bool EventQueue::cancel(const EventKey& key) {
  for (const Node& node : heap_) {
    if (node.key.sequence == key.sequence) {
      if (slot_sequence_[node.slot] == kCancelled) {
        return false;
      }
      slot_sequence_[node.slot] = kCancelled;
      actions_[node.slot] = nullptr;  // what it captured is released now, not when it surfaces
      --live_;
      drop_cancelled_top();
      return true;
    }
  }
  return false;  // fired, or never scheduled here
}

void EventQueue::release(uint32_t slot) { free_slots_.push_back(slot); }

void EventQueue::drop_cancelled_top() {
  while (!heap_.empty() && slot_sequence_[heap_.front().slot] == kCancelled) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    release(heap_.back().slot);
    heap_.pop_back();
  }
}

void EventQueue::compact() {
  std::erase_if(heap_, [&](const Node& node) {
    if (slot_sequence_[node.slot] != kCancelled) return false;
    release(node.slot);
    return true;
  });
  std::make_heap(heap_.begin(), heap_.end(), Later{});
}

std::optional<TimePs> EventQueue::next_time() const {
  if (live_ == 0) {
    return std::nullopt;
  }
  return heap_.front().key.time_ps;  // never a cancelled event: those are dropped on top
}

std::optional<std::pair<EventKey, EventQueue::Action>> EventQueue::pop() {
  if (live_ == 0) {
    return std::nullopt;
  }
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  const Node top = heap_.back();
  heap_.pop_back();
  --live_;
  std::pair<EventKey, Action> event{top.key, std::move(actions_[top.slot])};
  release(top.slot);
  drop_cancelled_top();
  return event;
}

}  // namespace simdev
