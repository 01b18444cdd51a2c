// The daemon's lane (simdev/service/server/session/lane.hpp): besides its own thread, another
// thread may take the lane's turn, at once when the lane is idle (the io thread's short calls) or
// waiting a bounded time (a wait lane fetching outputs). Items must never overlap, and the
// bounded wait must give up rather than block.
#include "simdev/service/server/session/lane.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace {

using simdev::service::server::Lane;
using namespace std::chrono_literals;

// Blocks the lane's thread until released, and tells when it has started.
struct BlockingItem {
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  Lane::Work work() {
    return [this, released = released] {
      started.set_value();
      released.wait_for(10s);
    };
  }
};

// Waits until everything posted before has run.
void drain(Lane& lane) {
  std::promise<void> done;
  auto future = done.get_future();
  lane.post([&done] { done.set_value(); });
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
}

TEST(Lane, RunsHereOnlyWhenIdle) {
  Lane lane("test");
  BlockingItem blocking;
  lane.post(blocking.work());
  ASSERT_EQ(blocking.started.get_future().wait_for(10s), std::future_status::ready);
  bool ran = false;
  Lane::Work mark = [&ran] { ran = true; };
  EXPECT_FALSE(lane.run_here_if_idle(mark)) << "ran beside the lane's running item";
  EXPECT_FALSE(ran);
  blocking.release.set_value();
  // Waits for the item to hand the turn back; nothing else is queued, so the lane is idle.
  ASSERT_TRUE(lane.run_here([] {}, 10s));
  std::thread::id where;
  Lane::Work here = [&where] { where = std::this_thread::get_id(); };
  EXPECT_TRUE(lane.run_here_if_idle(here));
  EXPECT_EQ(where, std::this_thread::get_id());
}

TEST(Lane, RunHereGivesUpAtItsBound) {
  Lane lane("test");
  BlockingItem blocking;
  lane.post(blocking.work());
  ASSERT_EQ(blocking.started.get_future().wait_for(10s), std::future_status::ready);
  bool ran = false;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(lane.run_here([&ran] { ran = true; }, 50ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
  EXPECT_FALSE(ran);
  blocking.release.set_value();
  EXPECT_TRUE(lane.run_here([&ran] { ran = true; }, 10s));
  EXPECT_TRUE(ran);
}

TEST(Lane, ItemsNeverOverlap) {
  Lane lane("test");
  std::atomic<bool> inside{false};
  std::atomic<int> overlaps{0};
  int count = 0;  // plain: only ever touched by the item holding the turn
  auto item = [&] {
    if (inside.exchange(true)) ++overlaps;
    ++count;
    std::this_thread::sleep_for(20us);
    inside = false;
  };
  std::thread other([&] {
    for (int i = 0; i < 200; ++i) {
      Lane::Work work = item;
      if (!lane.run_here_if_idle(work)) EXPECT_TRUE(lane.run_here(item, 10s));
    }
  });
  for (int i = 0; i < 200; ++i) lane.post(item);
  other.join();
  drain(lane);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(count, 400);
}

}  // namespace
