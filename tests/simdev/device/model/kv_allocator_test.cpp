// First-fit KV range allocation, exhaustion, and merging of freed neighbours.
#include <gtest/gtest.h>

#include "simdev/device/model/kv_allocator.hpp"

namespace simdev {
namespace {

TEST(KvAllocator, FirstFitFromTheLowestAddress) {
  Invariants invariants;
  KvAllocator kv(100, invariants);
  auto a = kv.allocate(30);
  auto b = kv.allocate(30);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->begin, 0u);
  EXPECT_EQ(b->begin, 30u);
  ASSERT_TRUE(kv.release(*a));
  auto c = kv.allocate(10);  // lands in the hole at 0, not after b
  ASSERT_TRUE(c);
  EXPECT_EQ(c->begin, 0u);
  EXPECT_EQ(kv.free_tokens(), 60u);
}

TEST(KvAllocator, ExhaustionNeedsContiguousRoom) {
  Invariants invariants;
  KvAllocator kv(100, invariants);
  auto a = kv.allocate(40);
  auto b = kv.allocate(20);
  auto c = kv.allocate(40);
  ASSERT_TRUE(a && b && c);
  EXPECT_FALSE(kv.allocate(1));
  ASSERT_TRUE(kv.release(*a));
  ASSERT_TRUE(kv.release(*c));
  EXPECT_EQ(kv.free_tokens(), 80u);
  EXPECT_EQ(kv.largest_free_tokens(), 40u);
  EXPECT_FALSE(kv.allocate(50));  // 80 free, but no 50 in one piece
}

TEST(KvAllocator, FreedNeighboursMerge) {
  Invariants invariants;
  KvAllocator kv(90, invariants);
  auto a = kv.allocate(30);
  auto b = kv.allocate(30);
  auto c = kv.allocate(30);
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(kv.release(*a));
  ASSERT_TRUE(kv.release(*c));
  EXPECT_EQ(kv.free_range_count(), 2u);
  ASSERT_TRUE(kv.release(*b));
  EXPECT_EQ(kv.free_range_count(), 1u);
  EXPECT_EQ(kv.largest_free_tokens(), 90u);
  EXPECT_TRUE(kv.allocate(90));
}

TEST(KvAllocator, RejectsDoubleReleaseAndZeroTokens) {
  Invariants invariants;
  KvAllocator kv(10, invariants);
  auto a = kv.allocate(5);
  ASSERT_TRUE(a);
  EXPECT_TRUE(kv.release(*a));
  EXPECT_FALSE(kv.release(*a));
  EXPECT_FALSE(kv.allocate(0));
  EXPECT_EQ(kv.free_tokens(), 10u);
}

}  // namespace
}  // namespace simdev
