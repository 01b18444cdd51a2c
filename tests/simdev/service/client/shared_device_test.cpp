// Sessions sharing one daemon's device (simdev/service/PROTOCOL.md, "Security model"): a
// reset by one session reports the other sessions' cancelled jobs as PREEMPTED, not as a
// cancel they never asked for; and the TCP port admits only a client holding the daemon's
// token. The device runs the virtual clock: a job stays in flight until its owner waits, so
// the order of events is fixed by the test, not by timing. The io-thread tests are the
// exception: they time a welcome against a half-second computation, with a 4x margin.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "abi/calrt_ext.hpp"
#include "simdev/service/protocol.hpp"
#include "tests/simdev/service/client/daemon_client_test.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

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

// How long a new connection to `socket` waits for the daemon's welcome: the io thread's work
// alone, no device call. Throws past `bound`.
std::chrono::milliseconds welcome_time(const fs::path& socket, std::chrono::milliseconds bound) {
  namespace svc = simdev::service;
  const auto start = std::chrono::steady_clock::now();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("cannot connect to " + socket.string());
  }
  svc::Hello hello;
  hello.client_name = "welcome-timer";
  const auto frame = svc::encode_frame(svc::MessageType::hello, 0, svc::encode_payload(hello));
  const bool sent =
      ::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(frame.size());
  uint8_t header[svc::kHeaderBytes];
  size_t got = 0;
  pollfd pfd{fd, POLLIN, 0};
  while (sent && got < sizeof header && ::poll(&pfd, 1, static_cast<int>(bound.count())) == 1) {
    const ssize_t n = ::recv(fd, header + got, sizeof header - got, 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  const auto decoded = svc::decode_header(header);
  if (got < sizeof header || !decoded || decoded->type != svc::MessageType::welcome) {
    throw std::runtime_error("no welcome within " + std::to_string(bound.count()) + " ms");
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// Jobs queued on the shared device's virtual clock by a session that never waits: full
// prefill chunks, each of its own calbin (sync mode allows one job in flight per calbin), all
// configured before the first submit (a configure waits for a device with no job in flight).
class QueuedJobs {
 public:
  QueuedJobs(const calrt::Api& api, const std::string& model, int count) {
    device_ = calrt::Device::create(api, calrt::DeviceKind::sim, 0, "");
    for (int i = 0; i < count; ++i) {
      Slot& slot = slots_.emplace_back();
      slot.calbin = calrt::Calbin::create(device_, CALRT_TEST_CALBIN);
      slot.calbin.configure();
      for (const calrt::ModelDesc& m : slot.calbin.models()) {
        if (m.name != model) continue;
        slot.input = calrt::Buffer::create(slot.calbin, m.name, calrt::Direction::input);
        slot.output = calrt::Buffer::create(slot.calbin, m.name, calrt::Direction::output);
        slot.kv = calrt::Kv::allocate(slot.calbin, 256);
        slot.kv.apply(slot.input);
        for (uint32_t c = 0; c < m.csrs.size(); ++c) {
          slot.input.set_csr(c, m.csrs[c].name == "cur_seq_len" ? 256 : 0);
        }
      }
    }
    for (Slot& slot : slots_) {
      jobs_.push_back(calrt::Job::submit(slot.calbin, model, slot.input, slot.output));
    }
  }

 private:
  struct Slot {
    calrt::Calbin calbin;
    calrt::Buffer input, output;
    calrt::Kv kv;
  };
  calrt::Device device_;  // first: destroyed last
  std::vector<Slot> slots_;
  std::vector<calrt::Job> jobs_;
};

// While `computing` (a call that makes the device compute for a while) runs on its own
// thread, and `meanwhile` (another call, if any) is started 50 ms in, a new connection's
// welcome (io-thread work alone) must not wait for the computation: a computation on the
// daemon's io thread, or a call blocked there behind one, would stop every session's reads,
// answers and keepalives, past clients' liveness bound for a large model.
void expect_io_thread_free_during(const std::function<void()>& computing,
                                  const std::function<void()>& meanwhile, const fs::path& socket) {
  const auto from = std::chrono::steady_clock::now();
  auto computation = std::async(std::launch::async, computing);
  std::this_thread::sleep_for(50ms);  // the device is computing
  std::future<void> other;
  if (meanwhile) {
    other = std::async(std::launch::async, meanwhile);
    std::this_thread::sleep_for(50ms);  // the other call has reached the daemon
  }
  const std::chrono::milliseconds welcome = welcome_time(socket, 60s);
  EXPECT_NO_THROW(computation.get());
  const auto computed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - from);
  if (other.valid()) EXPECT_NO_THROW(other.get());
  std::printf("computed %lld ms; welcome after %lld ms\n", static_cast<long long>(computed.count()),
              static_cast<long long>(welcome.count()));
  ASSERT_GE(computed, 150ms) << "too short a computation to tell";
  EXPECT_LT(welcome, computed / 4);
}

// On a virtual clock a Job_Wait computes every job queued before its own, holding the device
// for that long; another session's short call arrives meanwhile.
void expect_io_thread_free_while_waiting(calrt::Job& job, const fs::path& socket,
                                         const calrt::Api& api) {
  calrt::Device other = calrt::Device::create(api, calrt::DeviceKind::sim, 0, "");
  expect_io_thread_free_during(
      [&] {
        ASSERT_EQ(job.wait(60s), calrt::WaitResult::ready);
        EXPECT_EQ(job.status().state, calrt::JobState::completed) << job.status().message;
      },
      [&] { other.status(); }, socket);
}

// Full prefill chunks of the tiny model, one calbin each, within the daemon's 64 calbins; the
// daemon computes them on one host thread (kOneThread), so that they take past the 150 ms
// the checks need (about 240 ms here, against a welcome of under 1 ms).
constexpr int kQueuedJobs = 60;
const std::vector<std::string> kOneThread = {"--device-config", "host_threads=1"};

TEST_F(SharedDeviceTest, AWaitComputingLeavesTheIoThreadFree) {
  start(kOneThread);
  calrt_test::PrefillSession stepper(api_, CALRT_TEST_CALBIN);
  QueuedJobs queued(api_, stepper.model, kQueuedJobs);
  calrt::Job job = stepper.submit();  // its first: sent at once, its wait on the wait lane
  expect_io_thread_free_while_waiting(job, daemon_->socket(), api_);
}

// On a paced clock every call first runs the device's due events, whoever makes it: a short
// call must not run on the io thread there either. The jobs queued here all fall due at once
// (each waits a second of device time before its input DMA), so the first call after that
// computes them all.
TEST_F(SharedDeviceTest, APacedCatchUpLeavesTheIoThreadFree) {
  start({"--device-config", "clock=paced;submit_overhead_ns=1000000000;host_threads=1"});
  calrt_test::PrefillSession stepper(api_, CALRT_TEST_CALBIN);
  QueuedJobs queued(api_, stepper.model, kQueuedJobs);
  std::this_thread::sleep_for(1200ms);
  expect_io_thread_free_during([&] { stepper.device.status(); }, {}, daemon_->socket());
}

// The same for a held submit, sent with its wait in one Batch ("Held submits"): that wait runs
// on the device lane, and the batch must not count as a short call.
TEST_F(SharedDeviceTest, AHeldSubmitsWaitComputingLeavesTheIoThreadFree) {
  start(kOneThread);
  calrt_test::PrefillSession stepper(api_, CALRT_TEST_CALBIN);
  ASSERT_EQ(stepper.submit().wait(10s), calrt::WaitResult::ready);
  QueuedJobs queued(api_, stepper.model, kQueuedJobs);
  calrt::Job job = stepper.submit();  // repeats the last: held until its wait
  expect_io_thread_free_while_waiting(job, daemon_->socket(), api_);
}

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

// A job the watchdog ended (TIMED_OUT) is final: another session's reset does not count it
// among the jobs it ends. The daemon logs that count; the first reset, with only a timed-out
// job on the device, must log nothing, so the first such line is the second reset's, which
// ends one job in flight.
TEST_F(SharedDeviceTest, AResetDoesNotCountATimedOutJobAsInFlight) {
  start();
  calrt_test::PrefillSession hung(api_, CALRT_TEST_CALBIN);
  calrt::DeviceFaults::of(hung.device)
      .set_plan("seed: 1\nfaults:\n  - kind: job_hang\n    during: prefill\n    at_op: 1\n");
  calrt::Job timed_out = hung.submit();
  // Past the device's job watchdog (job_watchdog_ms, 10 s); virtual time: returns at once, with
  // the job's DEVICE_HUNG.
  EXPECT_THROW(timed_out.wait(std::chrono::seconds(60)), calrt::Error);
  ASSERT_EQ(timed_out.status().state, calrt::JobState::timed_out) << timed_out.status().message;

  calrt::Device other = calrt::Device::create(api_, calrt::DeviceKind::sim, 0, "");
  other.reset(calrt::ResetLevel::full);
  calrt::DeviceFaults::of(hung.device).set_plan("seed: 1\nfaults: []\n");
  calrt_test::PrefillSession victim(api_, CALRT_TEST_CALBIN);
  calrt::Job job = victim.submit();
  other.reset(calrt::ResetLevel::job_abort);
  ASSERT_EQ(job.wait(std::chrono::seconds(10)), calrt::WaitResult::ready);
  EXPECT_EQ(job.status().code, CALRT_PREEMPTED) << job.status().message;

  const std::string ended = "job(s) of other sessions";
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (daemon_->output().find(ended) == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  const std::string output = daemon_->output();
  const size_t at = output.find(ended);
  ASSERT_NE(at, std::string::npos) << output;
  const size_t line = output.rfind('\n', at) + 1;
  EXPECT_NE(output.substr(line, at - line).find("level 1 ended 1 "), std::string::npos) << output;
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
