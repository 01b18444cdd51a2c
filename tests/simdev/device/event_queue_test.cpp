// The event queue's total order (time, band, sequence) and the engine's clock rules.
#include <gtest/gtest.h>

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
