// The event queue's total order (time, band, sequence) and the engine's clock rules.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "simdev/device/base/engine.hpp"

namespace simdev {
namespace {

TEST(EventQueue, OrdersByTimeThenBandThenSequence) {
  EventQueue queue;
  std::vector<int> fired;
  ASSERT_TRUE(queue.schedule(20, Band::kJobStart, [&] { fired.push_back(4); }));
  ASSERT_TRUE(queue.schedule(10, Band::kHost, [&] { fired.push_back(3); }));
  ASSERT_TRUE(queue.schedule(10, Band::kJobComplete, [&] { fired.push_back(1); }));
  ASSERT_TRUE(queue.schedule(10, Band::kJobComplete, [&] { fired.push_back(2); }));
  ASSERT_TRUE(queue.schedule(5, Band::kHost, [&] { fired.push_back(0); }));
  while (auto event = queue.pop()) {
    event->second();
  }
  EXPECT_EQ(fired, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(queue.max_depth(), 5u);
  EXPECT_EQ(queue.size(), 0u);
}

TEST(EventQueue, CancelRemovesOnlyThatEvent) {
  EventQueue queue;
  int fired = 0;
  auto a = queue.schedule(1, Band::kHost, [&] { fired += 1; });
  auto b = queue.schedule(1, Band::kHost, [&] { fired += 10; });
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(queue.cancel(*a));
  EXPECT_FALSE(queue.cancel(*a));
  while (auto event = queue.pop()) {
    event->second();
  }
  EXPECT_EQ(fired, 10);
}

TEST(EventQueue, IsBounded) {
  EventQueue queue;
  for (size_t i = 0; i < EventQueue::kCapacity; ++i) {
    ASSERT_TRUE(queue.schedule(i, Band::kHost, [] {}));
  }
  auto overflow = queue.schedule(0, Band::kHost, [] {});
  ASSERT_FALSE(overflow);
  EXPECT_EQ(overflow.error().code, CALRT_INTERNAL);
}

// The heap against an ordered map of the same events (the queue's previous implementation,
// and the definition of its order), through a seeded mix of schedules at colliding times and
// bands, cancels of pending, fired and already cancelled events, and pops.
TEST(EventQueue, MatchesAnOrderedMapUnderRandomScheduleCancelAndPop) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    EventQueue queue;
    std::map<EventKey, int> model;
    std::vector<EventKey> issued;
    uint64_t state = seed;
    auto draw = [&](uint64_t below) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return (state >> 33) % below;
    };
    int fired = -1;
    for (int step = 0; step < 5000; ++step) {
      const uint64_t op = draw(10);
      if (op < 5) {
        const int id = step;
        auto key =
            queue.schedule(draw(50), static_cast<Band>(draw(4)), [&fired, id] { fired = id; });
        ASSERT_TRUE(key);
        model.emplace(*key, id);
        issued.push_back(*key);
      } else if (op < 7 && !issued.empty()) {
        const EventKey key = issued[draw(issued.size())];
        EXPECT_EQ(queue.cancel(key), model.erase(key) == 1) << "seed " << seed << " step " << step;
      } else {
        auto event = queue.pop();
        ASSERT_EQ(event.has_value(), !model.empty()) << "seed " << seed << " step " << step;
        if (!event) continue;
        const auto expected = model.begin();
        EXPECT_EQ(event->first.sequence, expected->first.sequence) << "seed " << seed;
        event->second();
        EXPECT_EQ(fired, expected->second);
        model.erase(expected);
      }
      ASSERT_EQ(queue.size(), model.size());
      ASSERT_EQ(queue.next_time().has_value(), !model.empty());
      if (!model.empty()) {
        ASSERT_EQ(*queue.next_time(), model.begin()->first.time_ps);
      }
    }
  }
}

// A node packs its sequence into 46 bits: the last one is still ordered and cancellable,
// and the one after it is refused rather than wrapped around to fire first.
TEST(EventQueue, UsedUpSequencesAreAnErrorNotAMisorder) {
  EventQueue queue(EventQueue::kMaxSequence - 1);
  std::vector<int> fired;
  auto a = queue.schedule(7, Band::kHost, [&] { fired.push_back(1); });
  auto b = queue.schedule(7, Band::kHost, [&] { fired.push_back(2); });
  ASSERT_TRUE(a && b);
  EXPECT_EQ(b->sequence, EventQueue::kMaxSequence);
  auto c = queue.schedule(0, Band::kFault, [&] { fired.push_back(0); });
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, CALRT_INTERNAL);
  EXPECT_NE(c.error().message.find("sequences are used up"), std::string::npos);
  while (auto event = queue.pop()) {
    EXPECT_EQ(event->first.band, Band::kHost);
    event->second();
  }
  EXPECT_EQ(fired, (std::vector<int>{1, 2}));
  EXPECT_FALSE(queue.cancel(*b));
}

TEST(EventQueue, CancelledEventsDoNotHoldItFull) {
  EventQueue queue;
  std::vector<EventKey> keys;
  for (size_t i = 0; i < EventQueue::kCapacity; ++i) {
    auto key = queue.schedule(1000 + i, Band::kHost, [] {});
    ASSERT_TRUE(key);
    keys.push_back(*key);
  }
  // Cancelled deep in the heap, not on top: they stay until compacted.
  for (size_t i = 1; i < 100; ++i) ASSERT_TRUE(queue.cancel(keys[keys.size() - i]));
  for (int i = 0; i < 99; ++i) ASSERT_TRUE(queue.schedule(5, Band::kHost, [] {}));
  EXPECT_FALSE(queue.schedule(5, Band::kHost, [] {}));  // 65536 pending again: full
}

TEST(Engine, TimeoutConsumesTheWholeWait) {
  Engine engine;
  bool done = false;
  ASSERT_TRUE(engine.after(100 * kPsPerMs, Band::kJobComplete, [&] { done = true; }));
  ASSERT_TRUE(engine.run_until(10 * kPsPerMs, [&] { return done; }));
  EXPECT_FALSE(done);
  EXPECT_EQ(engine.now(), 10 * kPsPerMs);  // a 10 ms wait on a slow job moves 10 ms
  ASSERT_TRUE(engine.run_until(kTimeNever, [&] { return done; }));
  EXPECT_TRUE(done);
  EXPECT_EQ(engine.now(), 100 * kPsPerMs);  // stops at the event, not the deadline
}

TEST(Engine, EventsScheduledWhileRunningKeepTheOrder) {
  Engine engine;
  std::vector<TimePs> times;
  ASSERT_TRUE(engine.after(5, Band::kHost, [&] {
    times.push_back(engine.now());
    (void)engine.after(5, Band::kHost, [&] { times.push_back(engine.now()); });
  }));
  ASSERT_TRUE(engine.run_until(100, [] { return false; }));
  EXPECT_EQ(times, (std::vector<TimePs>{5, 10}));
  EXPECT_EQ(engine.now(), 100u);
}

}  // namespace
}  // namespace simdev
