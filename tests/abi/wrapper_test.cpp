// The C++ wrapper (abi/calrt.hpp) against a fake runtime table.
#include <gtest/gtest.h>

#include <type_traits>

#include "abi/calrt.hpp"
#include "tests/abi/fake_api.hpp"

namespace {

// Owners are move-only and have an empty default state.
static_assert(!std::is_copy_constructible_v<calrt::Device>);
static_assert(!std::is_copy_assignable_v<calrt::Kv>);
static_assert(std::is_nothrow_move_constructible_v<calrt::Buffer>);
static_assert(std::is_nothrow_move_assignable_v<calrt::Job>);
static_assert(!std::is_convertible_v<calrt::Device, bool>);  // operator bool is explicit
static_assert(calrt::detail::kStructSize<Calrt_Device_Status_Args> ==
              CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE);

class WrapperTest : public ::testing::Test {
 protected:
  void SetUp() override { table_ = fake::make_table(); }
  calrt::Api api() const { return calrt::Api(&table_); }
  CalrtApi table_{};
};

TEST_F(WrapperTest, ArgsAreZeroedWithStructSize) {
  const auto args = calrt::detail::make_args<Calrt_Job_Wait_Args>();
  EXPECT_EQ(args.struct_size, CALRT_JOB_WAIT_ARGS_STRUCT_SIZE);
  EXPECT_EQ(args.job, nullptr);
  EXPECT_EQ(args.timeout_ns, 0u);
}

TEST_F(WrapperTest, NullEntryIsUnimplementedNamingTheFunction) {
  table_.Device_Reset = nullptr;
  calrt::Device device = calrt::Device::create(api(), calrt::DeviceKind::sim);
  try {
    device.reset(calrt::ResetLevel::chip);
    FAIL() << "expected calrt::Error";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_UNIMPLEMENTED);
    EXPECT_EQ(error.fault_class(), calrt::FaultClass::request);
    EXPECT_EQ(error.function(), "Device_Reset");
    EXPECT_NE(std::string(error.what()).find("Device_Reset"), std::string::npos);
  }
}

TEST_F(WrapperTest, EntryBeyondStructSizeIsUnimplementedAndNotCalled) {
  // An older runtime: its table ends before Kv_Capacity although the pointer is set.
  table_.struct_size = offsetof(CalrtApi, Kv_Capacity);
  const calrt::Calbin calbin(reinterpret_cast<CalrtCalbin*>(new int(2)), {calrt::Api(&table_)});
  try {
    (void)calbin.kv_capacity();
    FAIL() << "expected calrt::Error";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_UNIMPLEMENTED);
    EXPECT_NE(std::string(error.what()).find("Kv_Capacity"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("struct_size"), std::string::npos);
  }
  EXPECT_EQ(fake::state().kv_capacity_calls, 0);
}

TEST_F(WrapperTest, EmptyApiIsUnimplemented) {
  EXPECT_THROW(calrt::Device::create(calrt::Api(), calrt::DeviceKind::sim), calrt::Error);
}

TEST_F(WrapperTest, RuntimeErrorBecomesTypedErrorAndIsDestroyed) {
  try {
    calrt::Device::create(api(), calrt::DeviceKind::sim, 0, "fail");
    FAIL() << "expected calrt::Error";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_INVALID_ARGUMENT);
    EXPECT_EQ(error.fault_class(), calrt::FaultClass::request);
    EXPECT_EQ(error.message(), "config key 'fail' is not known");
    EXPECT_EQ(std::string(error.what()),
              "Device_Create: INVALID_ARGUMENT (request): config key 'fail' is not known");
  }
  EXPECT_EQ(fake::state().errors_created, 1);
  EXPECT_EQ(fake::state().errors_destroyed, 1);
}

TEST(FaultClass, FollowsTheCodesHighByte) {
  EXPECT_EQ(calrt::fault_class_of(CALRT_KV_EXHAUSTED), calrt::FaultClass::request);
  EXPECT_EQ(calrt::fault_class_of(CALRT_NOT_CONFIGURED), calrt::FaultClass::model);
  EXPECT_EQ(calrt::fault_class_of(CALRT_DEVICE_HUNG), calrt::FaultClass::device);
  EXPECT_EQ(calrt::fault_class_of(static_cast<CalrtCode>(0x0FF)), calrt::FaultClass::device);
  EXPECT_EQ(calrt::code_name(CALRT_KV_EXHAUSTED), "KV_EXHAUSTED");
}

TEST_F(WrapperTest, OwnersReleaseOnceAndMoveLeavesEmpty) {
  {
    calrt::Device device = calrt::Device::create(api(), calrt::DeviceKind::sim);
    EXPECT_TRUE(device);
    calrt::Device moved = std::move(device);
    EXPECT_FALSE(device);  // NOLINT(bugprone-use-after-move): the empty state is the point
    EXPECT_TRUE(moved);
    EXPECT_EQ(moved.status().state, calrt::DeviceState::open);
    try {
      (void)device.status();
      FAIL() << "expected calrt::Error";
    } catch (const calrt::Error& error) {
      EXPECT_EQ(error.code(), CALRT_INVALID_HANDLE);
    }
  }
  EXPECT_EQ(fake::state().devices_created, 1);
  EXPECT_EQ(fake::state().devices_destroyed, 1);
  calrt::Device explicit_close = calrt::Device::create(api(), calrt::DeviceKind::sim);
  explicit_close.destroy();
  EXPECT_FALSE(explicit_close);
  EXPECT_EQ(fake::state().devices_destroyed, 2);
}

TEST_F(WrapperTest, OutOfRangeEnumFromRuntimeIsInternal) {
  fake::state().device_state_override = 42;
  const calrt::Device device = calrt::Device::create(api(), calrt::DeviceKind::sim);
  try {
    (void)device.status();
    FAIL() << "expected calrt::Error";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_INTERNAL);
    EXPECT_NE(std::string(error.what()).find("42"), std::string::npos);
  }
}

TEST_F(WrapperTest, TimeoutsConvertToNanoseconds) {
  const calrt::Device device = calrt::Device::create(api(), calrt::DeviceKind::sim);
  const calrt::Calbin calbin = calrt::Calbin::create(device, "/nowhere");
  const calrt::Buffer in = calrt::Buffer::create(calbin, "m", calrt::Direction::input);
  const calrt::Buffer out = calrt::Buffer::create(calbin, "m", calrt::Direction::output);
  calrt::Job job = calrt::Job::submit(calbin, "m", in, out);
  job.wait();
  EXPECT_EQ(fake::state().last_wait_timeout_ns, CALRT_TIMEOUT_DEFAULT);
  job.wait(std::chrono::milliseconds(5));
  EXPECT_EQ(fake::state().last_wait_timeout_ns, 5'000'000u);
  job.wait(calrt::kInfiniteTimeout);
  EXPECT_EQ(fake::state().last_wait_timeout_ns, CALRT_TIMEOUT_INFINITE);
  EXPECT_THROW(job.wait(std::chrono::milliseconds(-1)), calrt::Error);
}

TEST_F(WrapperTest, WaitSeparatesTimedOutFromFailed) {
  const calrt::Device device = calrt::Device::create(api(), calrt::DeviceKind::sim);
  const calrt::Calbin calbin = calrt::Calbin::create(device, "/nowhere");
  const calrt::Buffer in = calrt::Buffer::create(calbin, "m", calrt::Direction::input);
  const calrt::Buffer out = calrt::Buffer::create(calbin, "m", calrt::Direction::output);
  calrt::Job job = calrt::Job::submit(calbin, "m", in, out);
  fake::state().job_hung = true;
  EXPECT_EQ(job.wait(std::chrono::milliseconds(10)), calrt::WaitResult::not_ready);
  EXPECT_FALSE(job.status().is_final());
  fake::state().job_hung = false;
  fake::state().job_fails = true;
  EXPECT_EQ(job.wait(std::chrono::milliseconds(10)), calrt::WaitResult::ready);
  const calrt::JobStatus status = job.status();
  EXPECT_EQ(status.state, calrt::JobState::failed);
  EXPECT_EQ(status.code, CALRT_DMA_ERROR);
  EXPECT_EQ(status.fault_class(), calrt::FaultClass::device);
  EXPECT_EQ(status.message, "DMA error on chip 1");
  EXPECT_EQ(status.end_time.count(), 30);
}

TEST_F(WrapperTest, MappingUnmapsOnDestruction) {
  const calrt::Device device = calrt::Device::create(api(), calrt::DeviceKind::sim);
  const calrt::Calbin calbin = calrt::Calbin::create(device, "/nowhere");
  calrt::Buffer buffer = calrt::Buffer::create(calbin, "m", calrt::Direction::input);
  {
    const calrt::Mapping mapping = buffer.map(0);
    EXPECT_EQ(mapping.size(), 64u);
    EXPECT_EQ(mapping.as<int32_t>().size(), 16u);
    EXPECT_EQ(fake::state().unmaps, 0);
  }
  EXPECT_EQ(fake::state().unmaps, 1);
  calrt::Mapping explicit_unmap = buffer.map(0);
  explicit_unmap.unmap();
  EXPECT_FALSE(explicit_unmap);
  EXPECT_EQ(fake::state().unmaps, 2);
}

TEST_F(WrapperTest, KvExhaustionAndDoubleFreeAreTypedErrors) {
  const calrt::Device device = calrt::Device::create(api(), calrt::DeviceKind::sim);
  const calrt::Calbin calbin = calrt::Calbin::create(device, "/nowhere");
  calrt::Kv first = calrt::Kv::allocate(calbin, 8);
  const calrt::Kv second = calrt::Kv::allocate(calbin, 8);
  try {
    calrt::Kv::allocate(calbin, 8);
    FAIL() << "expected KV_EXHAUSTED";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_KV_EXHAUSTED);
    EXPECT_EQ(error.fault_class(), calrt::FaultClass::request);
  }
  CalrtKv* raw = first.release();
  calbin.api().kv_free_raw(raw);
  try {
    calbin.api().kv_free_raw(raw);
    FAIL() << "expected INVALID_HANDLE";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_INVALID_HANDLE);
  }
  EXPECT_EQ(fake::state().errors_created, fake::state().errors_destroyed);
}

TEST_F(WrapperTest, ApiSharesItsKeepalive) {
  auto keepalive = std::make_shared<int>(7);
  calrt::Device device;
  {
    const calrt::Api shared(&table_, keepalive);
    device = calrt::Device::create(shared, calrt::DeviceKind::sim);
  }
  EXPECT_EQ(keepalive.use_count(), 2);  // the device's deleter holds the Api
  device = calrt::Device();
  EXPECT_EQ(keepalive.use_count(), 1);
}

}  // namespace
