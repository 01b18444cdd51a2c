// The device's fault and health state on its own: what clears a fault, which chip conditions
// a reset keeps, and that the injection record stays bounded.
#include <gtest/gtest.h>

#include <string>

#include "simdev/device/faults/fault_state.hpp"

namespace simdev {
namespace {

TEST(FaultState, TheFirstCauseIsTheRootAndTheLevelOnlyRises) {
  FaultState state(2);
  state.note(CALRT_RESET_CORES, false, "chip 1 hung");
  state.note(CALRT_RESET_JOB_ABORT, false, "the watchdog ended the job");
  EXPECT_EQ(state.needs_reset(), static_cast<uint32_t>(CALRT_RESET_CORES));
  EXPECT_EQ(state.cause(), "chip 1 hung");
  EXPECT_FALSE(state.self_test(CALRT_RESET_JOB_ABORT));  // too weak: the fault stays
  EXPECT_EQ(state.cause(), "chip 1 hung");
  EXPECT_TRUE(state.self_test(CALRT_RESET_CORES));
  EXPECT_EQ(state.needs_reset(), 0u);
  EXPECT_TRUE(state.cause().empty());
}

TEST(FaultState, APersistentFaultFailsEverySelfTest) {
  FaultState state(2);
  state.note(CALRT_RESET_FULL, true, "the D2D link went down");
  EXPECT_TRUE(state.stuck());
  EXPECT_FALSE(state.self_test(CALRT_RESET_FULL));
}

TEST(FaultState, AHungChipStaysHungUntilAResetPasses) {
  FaultState state(2);
  state.stop_chip(0, CALRT_CHIP_HUNG, "hung in layer 3");
  state.stop_chip(0, CALRT_CHIP_DEGRADED, "later");  // a hung chip is not made degraded
  state.set_activity("idle");                        // nor idle
  EXPECT_EQ(state.health(0, 0), CALRT_CHIP_HUNG);
  EXPECT_EQ(state.chips()[0].activity, "hung in layer 3");
  EXPECT_EQ(state.chips()[1].activity, "idle");
  state.stop_chip(5, CALRT_CHIP_FAILED, "no such chip");  // ignored
  EXPECT_TRUE(state.self_test(CALRT_RESET_JOB_ABORT));
  EXPECT_EQ(state.health(0, 0), CALRT_CHIP_OK);
  EXPECT_FALSE(state.chips()[0].stopped);
}

TEST(FaultState, CorrectedEccAndThrottlingDegradeWithoutAFault) {
  FaultState state(2);
  state.correct_ecc(1);
  EXPECT_EQ(state.health(1, 0), CALRT_CHIP_DEGRADED);
  EXPECT_TRUE(state.self_test(CALRT_RESET_JOB_ABORT));
  EXPECT_EQ(state.health(1, 0), CALRT_CHIP_OK);
  EXPECT_EQ(state.chips()[1].ecc_corrected, 1u);  // counted since the device was created
  state.throttle_chip(0, 1000, 4);
  EXPECT_EQ(state.health(0, 999), CALRT_CHIP_DEGRADED);
  EXPECT_EQ(state.health(0, 1000), CALRT_CHIP_OK);
}

TEST(FaultState, KeepsTheMostRecentInjections) {
  FaultState state(2);
  for (size_t i = 0; i < FaultState::kMaxInjectionRecords + 3; ++i) {
    state.record(Injection{}, FaultSite::kPrefill, i, 0, std::to_string(i));
  }
  ASSERT_EQ(state.injections().size(), FaultState::kMaxInjectionRecords);
  EXPECT_EQ(state.injections().front().detail, "3");
}

}  // namespace
}  // namespace simdev
