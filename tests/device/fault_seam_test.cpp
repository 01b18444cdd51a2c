// The fault-injection seam at the device level: a FaultPlan that fails a job with a
// device-class code faults the device until a reset.
#include <gtest/gtest.h>

#include <cstring>

#include "sim_session.hpp"
#include "simdev/device/device.hpp"

namespace simdev {
namespace {

class HangSecondJob : public FaultPlan {
 public:
  std::optional<Fault> on_job_start(uint64_t, TimePs) override {
    if (++starts_ == 2) {
      return Fault{CALRT_DEVICE_HUNG, "injected: watchdog fired"};
    }
    return std::nullopt;
  }

 private:
  int starts_ = 0;
};

TEST(FaultSeam, DeviceFaultNeedsReset) {
  auto device = Device::create("");
  ASSERT_TRUE(device);
  Device& d = **device;
  d.set_fault_plan(std::make_unique<HangSecondJob>());
  auto calbin = d.calbin_create(test::tiny_calbin().string(), 0);
  ASSERT_TRUE(calbin) << calbin.error().message;
  ASSERT_TRUE(d.calbin_configure(*calbin, 0));
  const std::string decode = (*d.calbin(*calbin))->manifest.models[1].name;
  auto in = d.buffer_create(*calbin, decode, CALRT_INPUT, 0);
  auto out = d.buffer_create(*calbin, decode, CALRT_OUTPUT, 0);
  auto kv = d.kv_allocate(*calbin, 16);
  ASSERT_TRUE(in && out && kv);
  ASSERT_TRUE(d.kv_apply(*kv, *in));
  ASSERT_TRUE(d.buffer_set_csr(*in, 0, 1));
  auto first = d.job_submit(*calbin, decode, *in, *out);
  ASSERT_TRUE(first);
  ASSERT_EQ(d.job_wait(*first, 0)->state, CALRT_JOB_COMPLETED);
  auto second = d.job_submit(*calbin, decode, *in, *out);
  ASSERT_TRUE(second);
  auto waited = d.job_wait(*second, 0);
  ASSERT_FALSE(waited);
  EXPECT_EQ(waited.error().code, CALRT_DEVICE_HUNG);
  EXPECT_EQ((*d.job(*second))->state, CALRT_JOB_FAILED);
  EXPECT_EQ(d.status().state, CALRT_DEVICE_FAULTED);
  EXPECT_EQ(d.status().error_count, 1u);
  EXPECT_EQ(d.status().last_error, CALRT_DEVICE_HUNG);
  auto refused = d.job_submit(*calbin, decode, *in, *out);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, CALRT_WRONG_STATE);
  EXPECT_NE(refused.error().message.find("FAULTED"), std::string::npos);
  auto state = d.reset(CALRT_RESET_CORES, 0);
  ASSERT_TRUE(state);
  EXPECT_EQ(*state, CALRT_DEVICE_CONFIGURED);
  auto third = d.job_submit(*calbin, decode, *in, *out);
  ASSERT_TRUE(third);
  EXPECT_EQ(d.job_wait(*third, 0)->state, CALRT_JOB_COMPLETED);
  EXPECT_GT(d.max_event_queue_depth(), 0u);
}

}  // namespace
}  // namespace simdev
