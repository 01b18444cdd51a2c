// Random streams: reproducible per (seed, subsystem), independent across subsystems.
#include <gtest/gtest.h>

#include "simdev/device/base/random_stream.hpp"

namespace simdev {
namespace {

TEST(RandomStream, SameSeedAndNameGiveTheSameSequence) {
  RandomStream a(42, "faults");
  RandomStream b(42, "faults");
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(a.next(), b.next());
  }
}

TEST(RandomStream, SubsystemsAndSeedsAreIndependent) {
  RandomStream faults(42, "faults");
  RandomStream links(42, "links");
  RandomStream other_seed(43, "faults");
  const uint64_t first = faults.next();
  EXPECT_NE(first, links.next());
  EXPECT_NE(first, other_seed.next());
  RandomStream bounded(1, "x");
  for (int i = 0; i < 100; ++i) {
    EXPECT_LT(bounded.below(7), 7u);
  }
}

}  // namespace
}  // namespace simdev
