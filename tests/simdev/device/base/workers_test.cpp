// The device's host threads: every piece runs once, on more than one thread when there are
// several, nested calls stay on their thread, and the ranges cover their count exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "simdev/device/base/workers.hpp"

namespace simdev {
namespace {

TEST(Workers, RunsEveryPieceOnceAndWaitsForAll) {
  for (const size_t threads : {1, 2, 3}) {
    Workers workers(threads);
    EXPECT_EQ(workers.threads(), threads);
    for (const size_t count : {0, 1, 2, 7, 100}) {
      std::vector<std::atomic<int>> runs(count);
      workers.run(count, [&](size_t i) { runs[i]++; });
      for (size_t i = 0; i < count; ++i) EXPECT_EQ(runs[i].load(), 1) << threads << "/" << i;
    }
  }
}

// With two threads and two pieces that each wait for the other to have started, both must
// run at once: on one thread the second would never start and the first would time out.
TEST(Workers, TwoPiecesRunOnTwoThreadsAtOnce) {
  Workers workers(2);
  std::atomic<int> started{0};
  std::mutex mutex;
  std::set<std::thread::id> ids;
  bool both = true;
  workers.run(2, [&](size_t) {
    {
      std::lock_guard lock(mutex);
      ids.insert(std::this_thread::get_id());
    }
    started++;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (started.load() < 2) both = false;
  });
  EXPECT_TRUE(both);
  EXPECT_EQ(ids.size(), 2u);
}

TEST(Workers, ANestedRunStaysOnItsThread) {
  Workers workers(2);
  std::atomic<int> mismatched{0};
  workers.run(2, [&](size_t) {
    const auto outer = std::this_thread::get_id();
    workers.run(4, [&](size_t) {
      if (std::this_thread::get_id() != outer) mismatched++;
    });
  });
  EXPECT_EQ(mismatched.load(), 0);
}

// One pool per thread count while it is held; callers on two threads take turns and each
// still gets every piece of its own run.
TEST(Workers, TheSharedPoolIsOnePerThreadCountAndTakesTurns) {
  const auto a = Workers::shared(2), b = Workers::shared(2), c = Workers::shared(3);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  std::atomic<int> total{0};
  auto caller = [&] {
    for (int round = 0; round < 200; ++round) {
      std::vector<std::atomic<int>> runs(8);
      a->run(8, [&](size_t i) { runs[i]++; });
      for (auto& r : runs) total += r.load() == 1 ? 1 : 1000;
    }
  };
  std::thread one(caller), two(caller);
  one.join();
  two.join();
  EXPECT_EQ(total.load(), 2 * 200 * 8);
}

TEST(Workers, ZeroThreadsTakesTheMachines) {
  Workers workers(0);
  EXPECT_EQ(workers.threads(), std::max<size_t>(1, std::thread::hardware_concurrency()));
}

TEST(Workers, SplitRangeCoversTheCountInAlignedParts) {
  for (const size_t count : {0, 1, 7, 8, 9, 64, 1000, 1537}) {
    for (const size_t parts : {1, 2, 3, 5}) {
      for (const size_t align : {1, 8}) {
        size_t next = 0;
        for (size_t i = 0; i < parts; ++i) {
          const Range r = split_range(count, parts, i, align);
          if (r.size == 0) continue;
          EXPECT_EQ(r.first, next) << count << "/" << parts << "/" << align;
          if (r.first + r.size < count) EXPECT_EQ(r.size % align, 0u);
          next = r.first + r.size;
        }
        EXPECT_EQ(next, count) << count << "/" << parts << "/" << align;
      }
    }
  }
}

}  // namespace
}  // namespace simdev
