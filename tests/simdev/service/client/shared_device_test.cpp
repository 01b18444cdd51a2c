// Sessions sharing one daemon's device (simdev/service/PROTOCOL.md, "Security model"): a
// reset by one session reports the other sessions' cancelled jobs as PREEMPTED, not as a
// cancel they never asked for; and the TCP port admits only a client holding the daemon's
// token. The device runs the virtual clock: a job stays in flight until its owner waits, so
// the order of events is fixed by the test, not by timing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>

#include "abi/calrt_ext.hpp"
#include "tests/simdev/service/client/daemon_client_test.hpp"

namespace fs = std::filesystem;

namespace {

class SharedDeviceTest : public calrt_test::DaemonClientTest {
 protected:
  // The code Device_Create over `endpoint` fails with, or CALRT_OK; its message in *message.
  static CalrtCode create_code(const std::string& endpoint, std::string* message) {
    try {
      calrt::Device device =
          calrt::Device::create(calrt_test::client_api(endpoint), calrt::DeviceKind::sim, 0, "");
      device.status();
      return CALRT_OK;
    } catch (const calrt::Error& e) {
      *message = e.what();
      return e.code();
    }
  }
};

TEST_F(SharedDeviceTest, AResetByAnotherSessionPreemptsItsJobs) {
  start();
  calrt_test::PrefillSession victim(api_, CALRT_TEST_CALBIN);
  calrt::Job job = victim.submit();
  calrt::Device other = calrt::Device::create(api_, calrt::DeviceKind::sim, 0, "");
  other.reset(calrt::ResetLevel::job_abort);

  ASSERT_EQ(job.wait(std::chrono::seconds(10)), calrt::WaitResult::ready);
  const calrt::JobStatus status = job.status();
  EXPECT_EQ(status.state, calrt::JobState::cancelled);
  EXPECT_EQ(status.code, CALRT_PREEMPTED) << status.message;
  EXPECT_NE(status.message.find("reset the shared device while this job was in flight"),
            std::string::npos)
      << status.message;
  // The victim's session goes on: a new job on the same objects completes.
  calrt::Job again = victim.submit();
  ASSERT_EQ(again.wait(std::chrono::seconds(10)), calrt::WaitResult::ready);
  EXPECT_EQ(again.status().state, calrt::JobState::completed) << again.status().message;
}

// The negative control of the test above: a session's own reset cancels its job as before,
// and a job that had completed before another session's reset stays COMPLETED.
TEST_F(SharedDeviceTest, AnOwnResetIsAPlainCancel) {
  start();
  calrt_test::PrefillSession session(api_, CALRT_TEST_CALBIN);
  calrt::Job done = session.submit();
  ASSERT_EQ(done.wait(std::chrono::seconds(10)), calrt::WaitResult::ready);
  calrt::Job job = session.submit();
  session.device.reset(calrt::ResetLevel::job_abort);
  ASSERT_EQ(job.wait(std::chrono::seconds(10)), calrt::WaitResult::ready);
  EXPECT_EQ(job.status().state, calrt::JobState::cancelled);
  EXPECT_EQ(job.status().code, CALRT_CANCELLED) << job.status().message;

  calrt::Device other = calrt::Device::create(api_, calrt::DeviceKind::sim, 0, "");
  other.reset(calrt::ResetLevel::job_abort);
  EXPECT_EQ(done.status().state, calrt::JobState::completed);
  EXPECT_EQ(done.status().code, CALRT_OK);
}

// The job serials (other than 0, events of no job) in a trace.
std::set<uint64_t> job_serials(const std::vector<calrt::TraceEvent>& events) {
  std::set<uint64_t> serials;
  for (const calrt::TraceEvent& e : events) {
    if (e.job_serial != 0) serials.insert(e.job_serial);
  }
  return serials;
}

// Without the daemon's per-session traces, the first reader would take every session's
// events and the second would find none; a restart by one would clear the other's.
TEST_F(SharedDeviceTest, EachSessionTracesItsOwnJobsOnly) {
  start();
  calrt_test::PrefillSession a(api_, CALRT_TEST_CALBIN);
  calrt_test::PrefillSession b(api_, CALRT_TEST_CALBIN);
  calrt_test::PrefillSession quiet(api_, CALRT_TEST_CALBIN);
  const calrt::DeviceTrace trace_a = calrt::DeviceTrace::of(a.device);
  const calrt::DeviceTrace trace_b = calrt::DeviceTrace::of(b.device);
  ASSERT_TRUE(trace_a && trace_b);
  trace_a.start();
  trace_b.start();
  for (calrt_test::PrefillSession* s : {&a, &b, &quiet, &a}) {
    calrt::Job job = s->submit();
    ASSERT_EQ(job.wait(std::chrono::seconds(10)), calrt::WaitResult::ready);
  }
  trace_a.start();  // restarts a's recording only: b's events stay b's to read
  calrt::Job late = a.submit();
  ASSERT_EQ(late.wait(std::chrono::seconds(10)), calrt::WaitResult::ready);

  const std::set<uint64_t> of_b = job_serials(trace_b.drain());
  const std::set<uint64_t> of_a = job_serials(trace_a.drain());
  EXPECT_EQ(of_b, (std::set<uint64_t>{2})) << "b ran the device's second job";
  EXPECT_EQ(of_a, (std::set<uint64_t>{5})) << "a's restart dropped its jobs 1 and 4";
  EXPECT_TRUE(job_serials(calrt::DeviceTrace::of(quiet.device).drain()).empty())
      << "a session that never started a recording sees nothing";
}

// What one session may keep unread is bounded: a larger recording is refused, not allocated.
TEST_F(SharedDeviceTest, ATraceAboveTheSessionLimitIsRefused) {
  start();
  calrt::Device device = calrt::Device::create(api_, calrt::DeviceKind::sim, 0, "");
  const calrt::DeviceTrace trace = calrt::DeviceTrace::of(device);
  ASSERT_TRUE(trace);
  try {
    trace.start((uint64_t{1} << 20) + 1);
    ADD_FAILURE() << "a recording of 2^20 + 1 events was accepted";
  } catch (const calrt::Error& e) {
    EXPECT_EQ(e.code(), CALRT_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("field 'capacity_events': 1048577 exceeds the daemon's "
                                         "per-session limit 1048576"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(trace.start(uint64_t{1} << 20));
}

TEST_F(SharedDeviceTest, TcpAdmitsOnlyTheTokenHolder) {
  start({"--tcp", "0"});
  const std::string endpoint = daemon_->tcp_endpoint();
  ASSERT_FALSE(endpoint.empty()) << daemon_->output();
  std::string message;

  ::unsetenv("CALRT_TOKEN_FILE");
  EXPECT_EQ(create_code(endpoint, &message), CALRT_PERMISSION_DENIED) << message;
  EXPECT_NE(message.find("set CALRT_TOKEN_FILE"), std::string::npos) << message;

  const fs::path wrong = dir_ / "wrong-token";
  std::ofstream(wrong) << "calrt-test-token-0123456789abcdeX\n";  // one character differs
  ::setenv("CALRT_TOKEN_FILE", wrong.c_str(), 1);
  message.clear();
  EXPECT_EQ(create_code(endpoint, &message), CALRT_PERMISSION_DENIED) << message;
  EXPECT_NE(message.find("field 'token': not the daemon's token"), std::string::npos) << message;
  EXPECT_EQ(message.find(daemon_->token()), std::string::npos) << "the answer echoes the token";

  ::setenv("CALRT_TOKEN_FILE", (dir_ / "missing").c_str(), 1);
  message.clear();
  EXPECT_EQ(create_code(endpoint, &message), CALRT_INVALID_ARGUMENT) << message;
  EXPECT_NE(message.find("CALRT_TOKEN_FILE="), std::string::npos) << message;

  // The holder of the token is the daemon user's equal: it holds the control role too.
  ::setenv("CALRT_TOKEN_FILE", daemon_->token_file().c_str(), 1);
  calrt::Device device =
      calrt::Device::create(calrt_test::client_api(endpoint), calrt::DeviceKind::sim, 0, "");
  EXPECT_NO_THROW(device.reset(calrt::ResetLevel::job_abort));
  EXPECT_NE(daemon_->output().find("hello with a wrong or missing token"), std::string::npos)
      << daemon_->output();
}

}  // namespace
