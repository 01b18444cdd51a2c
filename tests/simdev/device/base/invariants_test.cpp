// SIMDEV_ASSERT and the invariants it guards: counted by default, fatal under `strict`, and
// the KV allocator's tiling invariant holding over a seeded random sweep of its operations.
#include "simdev/device/base/invariants.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "simdev/device/job.hpp"
#include "simdev/device/model/kv_allocator.hpp"
#include "simdev/device/timing/device_config.hpp"

namespace simdev {
namespace {

TEST(Invariants, CountedByDefaultAndFatalWhenStrict) {
  Invariants counted;
  SIMDEV_ASSERT(counted, 1 + 1 == 2);
  EXPECT_EQ(counted.failures(), 0u);
  SIMDEV_ASSERT(counted, 1 + 1 == 3);
  SIMDEV_ASSERT(counted, 2 + 2 == 5);
  EXPECT_EQ(counted.failures(), 2u);
  EXPECT_FALSE(counted.stopped());
  // The first failure is kept, by file, line and condition.
  EXPECT_NE(counted.first_failure().find("invariants_test.cpp:"), std::string::npos)
      << counted.first_failure();
  EXPECT_NE(counted.first_failure().find("1 + 1 == 3"), std::string::npos);

  Invariants strict;
  strict.set_strict(true);
  try {
    SIMDEV_ASSERT(strict, 1 + 1 == 3);
    ADD_FAILURE() << "a strict failure did not throw";
  } catch (const InvariantBroken& broken) {
    EXPECT_NE(std::string(broken.what()).find("1 + 1 == 3"), std::string::npos) << broken.what();
  }
  EXPECT_TRUE(strict.stopped());
}

TEST(Invariants, TheDeviceOptionIsParsedAndBounded) {
  auto on = parse_device_config("strict=on");
  ASSERT_TRUE(on) << on.error().message;
  EXPECT_TRUE(on->strict);
  EXPECT_FALSE(DeviceConfig{}.strict);
  auto bad = parse_device_config("strict=1");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("strict"), std::string::npos) << bad.error().message;
}

// Random allocations and releases (of live and of bogus ranges) over many seeds: the tiling
// check inside every operation never fails, and the free count always agrees with a model
// kept here.
TEST(Invariants, KvAllocatorTilingHoldsOverRandomOperations) {
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    Invariants invariants;
    invariants.set_strict(true);
    std::mt19937_64 rng(seed);
    const uint64_t total = 1 + rng() % 4096;
    KvAllocator allocator(total, invariants);
    std::vector<KvRange> live;
    uint64_t used = 0;
    for (int step = 0; step < 400; ++step) {
      const uint64_t choice = rng() % 10;
      if (choice < 5) {
        const uint64_t tokens = 1 + rng() % (total / 4 + 1);
        if (auto range = allocator.allocate(tokens)) {
          live.push_back(*range);
          used += range->tokens;
        }
      } else if (choice < 9 && !live.empty()) {
        const size_t index = rng() % live.size();
        ASSERT_TRUE(allocator.release(live[index])) << "seed " << seed;
        used -= live[index].tokens;
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(index));
      } else {
        // A range that was never handed out is refused, and changes nothing.
        EXPECT_FALSE(allocator.release(KvRange{total + 1, 1})) << "seed " << seed;
      }
      ASSERT_EQ(allocator.free_tokens(), total - used) << "seed " << seed;
    }
    EXPECT_EQ(invariants.failures(), 0u) << "seed " << seed << ": " << invariants.first_failure();
  }
}

// A cancel's message is composed in a buffer of the caller's instead of allocated: the same
// text as job_label, cut to the buffer when it does not fit.
TEST(JobLabel, IntoABufferIsTheLabelCutToFit) {
  Job job;
  job.serial = 18446744073709551615ull;
  char text[64];
  EXPECT_EQ(job_label_into(job, " was cancelled", text), job_label(job) + " was cancelled");
  char small[12];
  EXPECT_EQ(job_label_into(job, " was cancelled", small), "job #1844674");
  char tight[8];
  job.serial = 42;
  EXPECT_EQ(job_label_into(job, " was cancelled", tight), "job #42 ");
}

}  // namespace
}  // namespace simdev
