// The daemon going away while a client waits: a thread blocked in Job_Wait on a job that
// never completes (a job_hang fault, paced clock so that the wait blocks in wall time) must
// get DEVICE_LOST within the bound, whether the daemon dies (socket closed) or hangs
// (SIGSTOP: only the liveness bound can tell); and the `calrt` runner over the service must
// exit non-zero reporting the lost device when its daemon is killed part-way.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <spdlog/fmt/fmt.h>

#include <future>
#include <optional>
#include <thread>

#include "abi/calrt_ext.hpp"
#include "daemon_process.hpp"
#include "load_support.hpp"
#include "runner/core/session.hpp"
#include "runner/core/submission_inputs.hpp"

namespace calrt_load {
namespace {

using namespace std::chrono_literals;

constexpr auto kLostBound = 3s;
// A job that hangs is ended by the device watchdog only after 10 s of (paced) device time,
// so a wait still blocked at kill time is blocked on the hang, not on the job's own work.
constexpr auto kSettle = 300ms;

constexpr const char* kHangPlan =
    "seed: 1\n"
    "faults:\n"
    "  - kind: job_hang\n"
    "    during: prefill\n"
    "    at_op: 1\n";

struct WaitOutcome {
  std::optional<CalrtCode> code;  // the error Job_Wait threw; none when it returned
  std::string what;
  Clock::time_point returned;
};

enum class Loss { killed, stopped };

void blocked_wait_gets_device_lost(Loss loss) {
  const GoldenInputs& golden = golden_inputs();
  ScratchDir dir;
  calrt_test::DaemonOptions options;
  options.extra_args = {"--device-config", "clock=paced"};
  calrt_test::DaemonProcess daemon(dir.path(), options);

  runner::Session session(golden.options);
  session.inputs = golden.inputs;
  session.api = client_api(daemon.endpoint());
  for (auto* step : {&runner::step_device, &runner::step_calbin, &runner::step_configure,
                     &runner::step_buffers}) {
    const runner::StepResult result = step(session);
    ASSERT_TRUE(result.passed()) << result.name << ": "
                                 << fmt::format("{}", fmt::join(result.failures, "; "));
  }
  const calrt::DeviceFaults faults = calrt::DeviceFaults::of(session.device);
  ASSERT_TRUE(faults) << "the client runtime does not offer CALRT_EXT_FAULT";
  faults.set_plan(kHangPlan);
  calrt::Kv kv = calrt::Kv::allocate(session.calbin, session.info.prefill_chunk);
  kv.apply(session.prefill.input);
  const std::vector<int32_t> tokens = {1, 2, 3};
  runner::write_submission(session.prefill, tokens, 0, 0, session.timeout());
  calrt::Job job = calrt::Job::submit(session.calbin, session.prefill.name(), session.prefill.input,
                                      session.prefill.output);

  std::promise<WaitOutcome> promise;
  std::future<WaitOutcome> future = promise.get_future();
  std::thread waiter([&] {
    WaitOutcome out;
    try {
      job.wait(30s);
    } catch (const calrt::Error& error) {
      out.code = error.code();
      out.what = error.what();
    }
    out.returned = Clock::now();
    promise.set_value(out);
  });
  const bool returned_early = future.wait_for(kSettle) == std::future_status::ready;
  const Clock::time_point lost_at = Clock::now();
  if (loss == Loss::killed) {
    daemon.kill_now();
  } else {
    daemon.stop();
  }
  const bool returned = future.wait_for(kLostBound + 5s) == std::future_status::ready;
  if (!returned) {
    // Unblock the waiter so that the test fails instead of hanging on join.
    daemon.kill_now();
  }
  waiter.join();
  ASSERT_FALSE(returned_early) << "Job_Wait returned before the daemon went away";
  ASSERT_TRUE(returned) << "Job_Wait still blocked " << (kLostBound + 5s).count()
                        << " s after the daemon went away";
  const WaitOutcome out = future.get();
  const double latency_ms =
      std::chrono::duration<double, std::milli>(out.returned - lost_at).count();
  std::printf("device lost (%s daemon): Job_Wait returned after %.1f ms: %s\n",
              loss == Loss::killed ? "killed" : "stopped", latency_ms, out.what.c_str());
  testing::Test::RecordProperty("device_lost_ms", static_cast<int>(latency_ms));
  ASSERT_TRUE(out.code.has_value()) << "Job_Wait returned without an error";
  EXPECT_EQ(*out.code, CALRT_DEVICE_LOST) << out.what;
  EXPECT_LT(out.returned - lost_at, kLostBound);

  // Everything after answers DEVICE_LOST at once; status still answers, with state LOST.
  EXPECT_EQ(session.device.status().state, calrt::DeviceState::lost);
  try {
    calrt::Kv::allocate(session.calbin, 1);
    ADD_FAILURE() << "Kv_Allocate succeeded on a lost device";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_DEVICE_LOST) << error.what();
  }
  daemon.kill_now();
}

TEST(DeviceLost, BlockedWaitWhenDaemonIsKilled) { blocked_wait_gets_device_lost(Loss::killed); }

TEST(DeviceLost, BlockedWaitWhenDaemonHangs) { blocked_wait_gets_device_lost(Loss::stopped); }

TEST(DeviceLost, RunnerExitsNonZeroWhenDaemonIsKilled) {
  ScratchDir dir;
  calrt_test::DaemonOptions options;
  options.extra_args = {"--device-config", "clock=paced"};
  calrt_test::DaemonProcess daemon(dir.path(), options);
  // Every case, the long prompts included, so that the golden steps are still running when
  // the daemon dies.
  ChildProcess runner(
      {CALRT_EXE, "smoke", CALRT_TEST_CALBIN, "--cases", "all", "--device", daemon.endpoint()});
  ASSERT_TRUE(runner.wait_for_output("] 4 buffers", 60s))
      << "the runner did not reach its buffers step:\n"
      << runner.output();
  ASSERT_FALSE(runner.wait_exit(0ms)) << "the runner finished before the daemon was killed:\n"
                                      << runner.output();
  const Clock::time_point killed_at = Clock::now();
  daemon.kill_now();
  const std::optional<int> status = runner.wait_exit(30s);
  const double latency_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - killed_at).count();
  const std::string output = runner.output();
  ASSERT_TRUE(status) << "the runner still runs 30 s after its daemon was killed:\n" << output;
  std::printf("device lost (calrt smoke): exited with %d after %.1f ms\n",
              WIFEXITED(*status) ? WEXITSTATUS(*status) : -1, latency_ms);
  testing::Test::RecordProperty("runner_exit_ms", static_cast<int>(latency_ms));
  ASSERT_TRUE(WIFEXITED(*status)) << "the runner died of a signal:\n" << output;
  EXPECT_NE(WEXITSTATUS(*status), 0) << output;
  EXPECT_NE(output.find("DEVICE_LOST"), std::string::npos) << output;
  EXPECT_LT(latency_ms, 5000.0) << output;
}

}  // namespace
}  // namespace calrt_load
