#include "simdev/device/base/event_queue.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace simdev {

static_assert(EventQueue::kCapacity <= (size_t{1} << 16), "a node's slot field is 16 bits");

EventKey EventQueue::Node::key() const {
  return {time_ps, static_cast<Band>(order >> 62), (order >> 16) & kMaxSequence};
}

void EventQueue::sift_up(size_t at, Node node) {
  while (at > 0) {
    const size_t parent = (at - 1) / kArity;
    if (!(node < heap_[parent])) break;
    heap_[at] = heap_[parent];
    at = parent;
  }
  heap_[at] = node;
}

void EventQueue::sift_down(size_t at, Node node) {
  const size_t size = heap_.size();
  for (;;) {
    const size_t first = at * kArity + 1;
    if (first >= size) break;
    const size_t last = std::min(first + kArity, size);
    size_t least = first;
    for (size_t child = first + 1; child < last; ++child) {
      if (heap_[child] < heap_[least]) least = child;
    }
    if (!(heap_[least] < node)) break;
    heap_[at] = heap_[least];
    at = least;
  }
  heap_[at] = node;
}

void EventQueue::pop_top() {
  const Node last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) sift_down(0, last);
}

Expected<EventKey> EventQueue::schedule(TimePs time_ps, Band band, Action action) {
  if (heap_.size() >= kCapacity && heap_.size() > live_) {
    compact();
  }
  if (heap_.size() >= kCapacity) {
    return fail(CALRT_INTERNAL,
                "event queue full (" + std::to_string(kCapacity) + " pending events)");
  }
  if (next_sequence_ > kMaxSequence) {
    return fail(CALRT_INTERNAL, "event queue: its " + std::to_string(kMaxSequence + 1) +
                                    " event sequences are used up");
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
  const uint64_t order =
      (uint64_t{static_cast<uint32_t>(band)} << 62) | (key.sequence << 16) | slot;
  heap_.emplace_back();
  sift_up(heap_.size() - 1, Node{time_ps, order});
  ++live_;
  max_depth_ = std::max(max_depth_, live_);
  return key;
}

bool EventQueue::cancel(const EventKey& key) {
  for (const Node& node : heap_) {
    if (node.key().sequence == key.sequence) {
      const uint32_t slot = node.slot();
      if (slot_sequence_[slot] == kCancelled) {
        return false;
      }
      slot_sequence_[slot] = kCancelled;
      actions_[slot] = nullptr;  // what it captured is released now, not when it surfaces
      --live_;
      drop_cancelled_top();
      return true;
    }
  }
  return false;  // fired, or never scheduled here
}

void EventQueue::release(uint32_t slot) { free_slots_.push_back(slot); }

void EventQueue::drop_cancelled_top() {
  while (!heap_.empty() && slot_sequence_[heap_.front().slot()] == kCancelled) {
    release(heap_.front().slot());
    pop_top();
  }
}

void EventQueue::compact() {
  std::erase_if(heap_, [&](const Node& node) {
    if (slot_sequence_[node.slot()] != kCancelled) return false;
    release(node.slot());
    return true;
  });
  for (size_t at = heap_.size() / kArity + 1; at-- > 0;) {
    if (at < heap_.size()) sift_down(at, heap_[at]);
  }
}

std::optional<TimePs> EventQueue::next_time() const {
  if (live_ == 0) {
    return std::nullopt;
  }
  return heap_.front().time_ps;  // never a cancelled event: those are dropped on top
}

std::optional<std::pair<EventKey, EventQueue::Action>> EventQueue::pop() {
  if (live_ == 0) {
    return std::nullopt;
  }
  const Node top = heap_.front();
  pop_top();
  --live_;
  std::pair<EventKey, Action> event{top.key(), std::move(actions_[top.slot()])};
  release(top.slot());
  drop_cancelled_top();
  return event;
}

}  // namespace simdev
