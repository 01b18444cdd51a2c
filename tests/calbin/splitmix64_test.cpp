// SplitMix64 against the reference implementation's first outputs: every stream the
// simulator, the runner and the benchmarks draw depends on this exact sequence.
#include <gtest/gtest.h>

#include "calbin/splitmix64.hpp"

namespace calbin {
namespace {

TEST(SplitMix64, ReferenceSequenceFromSeedZero) {
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(rng.next(), 0x06C45D188009454Full);
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);
}

TEST(SplitMix64, UniformAndBelowStayInRange) {
  SplitMix64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const double u = rng.uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
    EXPECT_LT(rng.below(13), 13u);
  }
  SplitMix64 untouched(7);
  EXPECT_EQ(untouched.below(0), 0u);  // no draw for an empty range
  EXPECT_EQ(untouched.next(), SplitMix64(7).next());
}

}  // namespace
}  // namespace calbin
