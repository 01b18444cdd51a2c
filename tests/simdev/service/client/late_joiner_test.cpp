// A client that joins while another client's jobs are in flight: its Calbin_Configure waits,
// bounded, for a moment with no job in flight instead of failing WRONG_STATE, and submits
// that arrive meanwhile queue behind it so that such a moment comes
// (simdev/service/server/session/quiet_point.hpp). The device runs the virtual clock: a job stays
// in flight until its owner waits for it, so every ordering below is fixed by the test, not by
// timing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>

#include "tests/simdev/service/client/daemon_client_test.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

class LateJoinerTest : public calrt_test::DaemonClientTest {
 protected:
  // The late joiner: its own device session and calbin, configured on another thread.
  struct Joiner {
    calrt::Device device;
    calrt::Calbin calbin;
  };
  std::future<CalrtCode> configure_late(Joiner& joiner, std::string* message) {
    joiner.device = calrt::Device::create(api_, calrt::DeviceKind::sim, 0, "");
    joiner.calbin = calrt::Calbin::create(joiner.device, CALRT_TEST_CALBIN);
    return std::async(std::launch::async, [&joiner, message] {
      try {
        joiner.calbin.configure();
        return CALRT_OK;
      } catch (const calrt::Error& e) {
        *message = e.what();
        return e.code();
      }
    });
  }
};

TEST_F(LateJoinerTest, ConfigureWaitsForTheRunningJobThenSucceeds) {
  start();
  calrt_test::PrefillSession running(api_, CALRT_TEST_CALBIN);
  calrt::Job job = running.submit();

  Joiner joiner;
  std::string message;
  auto configured = configure_late(joiner, &message);
  // The job cannot finish before its owner waits: the configure must still be waiting.
  ASSERT_EQ(configured.wait_for(300ms), std::future_status::timeout)
      << "configure answered while a job was in flight: " << message;

  ASSERT_EQ(job.wait(std::chrono::seconds(10)), calrt::WaitResult::ready);
  EXPECT_EQ(job.status().state, calrt::JobState::completed);
  ASSERT_EQ(configured.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(configured.get(), CALRT_OK) << message;
  EXPECT_TRUE(joiner.calbin.info().configured);
}

TEST_F(LateJoinerTest, SubmitsQueueBehindAWaitingConfigure) {
  start();
  calrt_test::PrefillSession running(api_, CALRT_TEST_CALBIN);
  calrt_test::PrefillSession second_owner(api_, CALRT_TEST_CALBIN);  // configured while quiet
  calrt::Job first = running.submit();

  Joiner joiner;
  std::string message;
  auto configured = configure_late(joiner, &message);
  ASSERT_EQ(configured.wait_for(300ms), std::future_status::timeout);

  // A second submit while the configure waits is held behind it. Were it to run, the device
  // would stay RUNNING after the first job and the configure would wait out its bound.
  auto second = std::async(std::launch::async, [&] { return second_owner.submit(); });
  ASSERT_EQ(second.wait_for(300ms), std::future_status::timeout)
      << "a submit ran past a waiting configure";

  ASSERT_EQ(first.wait(std::chrono::seconds(10)), calrt::WaitResult::ready);
  EXPECT_EQ(first.status().state, calrt::JobState::completed);
  ASSERT_EQ(configured.wait_for(5s), std::future_status::ready)
      << "the configure did not find the quiet point after the only running job finished";
  EXPECT_EQ(configured.get(), CALRT_OK) << message;
  ASSERT_EQ(second.wait_for(5s), std::future_status::ready);
  calrt::Job held = second.get();
  ASSERT_EQ(held.wait(std::chrono::seconds(10)), calrt::WaitResult::ready);
  EXPECT_EQ(held.status().state, calrt::JobState::completed);
}

TEST_F(LateJoinerTest, ConfigureFailsWithTheReasonAtItsBound) {
  start({"--configure-wait-ms", "300"});
  calrt_test::PrefillSession running(api_, CALRT_TEST_CALBIN);
  calrt::Job job = running.submit();  // never waited for: the device stays RUNNING

  Joiner joiner;
  std::string message;
  const auto begin = std::chrono::steady_clock::now();
  auto configured = configure_late(joiner, &message);
  ASSERT_EQ(configured.wait_for(10s), std::future_status::ready) << "the wait is not bounded";
  const auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_EQ(configured.get(), CALRT_WRONG_STATE);
  EXPECT_NE(message.find("device is RUNNING"), std::string::npos) << message;
  EXPECT_GE(took, 300ms);
}

TEST_F(LateJoinerTest, ZeroWaitKeepsTheImmediateRefusal) {
  start({"--configure-wait-ms", "0"});
  calrt_test::PrefillSession running(api_, CALRT_TEST_CALBIN);
  calrt::Job job = running.submit();

  Joiner joiner;
  std::string message;
  auto configured = configure_late(joiner, &message);
  ASSERT_EQ(configured.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(configured.get(), CALRT_WRONG_STATE) << message;
}

}  // namespace
