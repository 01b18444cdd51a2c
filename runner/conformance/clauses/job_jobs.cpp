// JOB: submit, wait, timeout, cancel. abi/CONFORMANCE.md#job-submit-wait-timeout-cancel
#include <fmt/format.h>
#include <time.h>
#include <algorithm>

#include <chrono>
#include <cstring>
#include <vector>
#include "abi/calrt_ext.hpp"

#include "runner/conformance/clauses/clauses.hpp"

namespace runner {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

void job_completes(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit(f, f.prefill);
  const calrt::JobStatus s = expect_final(job, calrt::JobState::completed, "a valid prefill");
  require(
      s.code == CALRT_OK && s.message.empty(),
      "a completed job reports code " + calrt::code_name(s.code) + " message '" + s.message + "'");
  const std::vector<nanoseconds> times = {s.submit_time,        s.start_time,       s.h2d_end_time,
                                          s.compute_start_time, s.compute_end_time, s.end_time};
  require(
      std::is_sorted(times.begin(), times.end()) && s.end_time.count() > 0,
      fmt::format("timestamps not ordered: submit {} start {} h2d_end {} compute_start {} "
                  "compute_end {} end {} ns",
                  s.submit_time.count(), s.start_time.count(), s.h2d_end_time.count(),
                  s.compute_start_time.count(), s.compute_end_time.count(), s.end_time.count()));
}

void job_preconditions(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  const ModelIo& io = f.prefill;
  expect_code(ctx.submit_raw(f, "conformance_no_such_model", io.input.get(), io.output.get()),
              CALRT_NOT_FOUND, "Job_Submit of an unknown model");
  expect_code(ctx.submit_raw(f, io.name(), io.output.get(), io.input.get()), CALRT_INVALID_ARGUMENT,
              "Job_Submit with input and output swapped");
  const std::vector<calrt::ModelDesc> models = f.calbin.models();
  const bool has_decode = std::any_of(models.begin(), models.end(), [](const auto& m) {
    return m.type == calrt::ModelType::decode;
  });
  if (has_decode) {
    ModelIo decode = ctx.model_io(f, calrt::ModelType::decode);
    const calrt::Kv kv = ctx.apply_kv(f, decode);
    expect_code(ctx.submit_raw(f, io.name(), decode.input.get(), decode.output.get()),
                CALRT_INVALID_ARGUMENT,
                "Job_Submit of " + io.name() + " with the decode model's buffers");
  }
  ModelIo bare = ctx.model_io(f, calrt::ModelType::prefill);
  ctx.write_inputs(bare, kJobTokens);
  expect_code(ctx.submit_raw(f, io.name(), bare.input.get(), bare.output.get()), CALRT_WRONG_STATE,
              "Job_Submit with no KV applied");
}

void job_sync_limit(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  ModelIo second = ctx.model_io(f, calrt::ModelType::prefill);
  const calrt::Kv kv = ctx.apply_kv(f, second);
  ctx.write_inputs(second, kJobTokens);
  calrt::Job held = ctx.submit_held(f, f.prefill);
  expect_code(ctx.submit_raw(f, second.name(), second.input.get(), second.output.get()), CALRT_BUSY,
              "a second Job_Submit in sync mode while one is in flight");
  require(!held.status().is_final(), "the held job became final during the check");
  held.cancel();
}

// Device time when the runtime offers its clock, else the host's steady clock.
class ClauseClock {
 public:
  explicit ClauseClock(const calrt::Device& device) : device_(calrt::DeviceClock::of(device)) {}
  nanoseconds now() const {
    if (device_) {
      return device_.now();
    }
    return std::chrono::duration_cast<nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch());
  }
  const char* name() const { return device_ ? "device clock" : "host steady clock"; }

 private:
  calrt::DeviceClock device_;
};

void job_wait_timing(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  ctx.plan_hang(f.device);
  calrt::Job job = ctx.submit(f, f.prefill);
  const ClauseClock clock(f.device);
  for (const milliseconds timeout : {milliseconds(10), milliseconds(50), milliseconds(200)}) {
    const nanoseconds begin = clock.now();
    const calrt::WaitResult result = job.wait(timeout);
    const nanoseconds elapsed = clock.now() - begin;
    require(result == calrt::WaitResult::not_ready,
            fmt::format("Job_Wait({} ms) on a hung job returned READY", timeout.count()));
    const calrt::JobState state = job.status().state;
    require(state == calrt::JobState::submitted || state == calrt::JobState::running,
            fmt::format("after a NOT_READY wait the job is {}", calrt::to_string(state)));
    const nanoseconds late_bound = timeout + timeout / 20 + milliseconds(2);
    require(elapsed >= timeout && elapsed <= late_bound,
            fmt::format("Job_Wait({} ms) took {:.3f} ms on the {}, expected [{}, {:.3f}] ms",
                        timeout.count(), std::chrono::duration<double, std::milli>(elapsed).count(),
                        clock.name(), timeout.count(),
                        std::chrono::duration<double, std::milli>(late_bound).count()));
  }
  job.cancel();
}

nanoseconds cpu_time(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return std::chrono::seconds(ts.tv_sec) + nanoseconds(ts.tv_nsec);
}

// JOB.4 holds a wait to its timeout on the device clock; this holds what the wait costs the
// host, on a clock that follows wall time (the paced simulator, or hardware). A wait returns
// NOT_READY no sooner than T and not long after it, and blocks instead of polling: the
// waiting thread, and the process as a whole (a runtime may poll from a thread of its own),
// stay near idle. The late and CPU bounds are wider than a quiet machine needs; the margins
// and the figures they were set from are in abi/CONFORMANCE.md (JOB.11).
void job_wait_host_cost(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready, 0, ClockNeed::real);
  ctx.plan_hang(f.device);
  calrt::Job job = ctx.submit(f, f.prefill);
  // A first wait lets the job run into its hang. A simulator does the device's work on the
  // waiting thread (the job's stages up to the hang), which is not the wait's cost; after the
  // hang the device has nothing to do until its watchdog, seconds away.
  if (job.wait(milliseconds(20)) != calrt::WaitResult::not_ready) {
    job.cancel();
    throw ClauseFailure("Job_Wait(20 ms) on a hung job returned READY");
  }
  constexpr milliseconds timeout(100);
  const auto wall_begin = std::chrono::steady_clock::now();
  const nanoseconds thread_begin = cpu_time(CLOCK_THREAD_CPUTIME_ID);
  const nanoseconds process_begin = cpu_time(CLOCK_PROCESS_CPUTIME_ID);
  const calrt::WaitResult result = job.wait(timeout);
  const nanoseconds thread_cpu = cpu_time(CLOCK_THREAD_CPUTIME_ID) - thread_begin;
  const nanoseconds process_cpu = cpu_time(CLOCK_PROCESS_CPUTIME_ID) - process_begin;
  const nanoseconds wall = std::chrono::steady_clock::now() - wall_begin;
  job.cancel();
  const auto ms = [](nanoseconds t) {
    return std::chrono::duration<double, std::milli>(t).count();
  };
  require(result == calrt::WaitResult::not_ready, "Job_Wait(100 ms) on a hung job returned READY");
  require(wall >= timeout, fmt::format("Job_Wait(100 ms) on a hung job returned NOT_READY after "
                                       "{:.3f} ms of wall time, before its timeout",
                                       ms(wall)));
  const nanoseconds late_bound = timeout + milliseconds(100);
  require(wall <= late_bound, fmt::format("Job_Wait(100 ms) on a hung job took {:.1f} ms of wall "
                                          "time, more than {:.0f} ms: it oversleeps",
                                          ms(wall), ms(late_bound)));
  // 5 % of a core over the wait, plus what one wake-up costs on a slow (sanitized) build.
  const nanoseconds thread_bound = wall / 20 + milliseconds(5);
  require(thread_cpu <= thread_bound,
          fmt::format("the thread in Job_Wait(100 ms) used {:.1f} ms of CPU in {:.1f} ms, more "
                      "than {:.1f} ms: it polls instead of blocking",
                      ms(thread_cpu), ms(wall), ms(thread_bound)));
  const nanoseconds process_bound = wall / 4 + milliseconds(10);
  require(process_cpu <= process_bound,
          fmt::format("the process used {:.1f} ms of CPU during Job_Wait(100 ms) ({:.1f} ms): "
                      "more than {:.1f} ms, some thread polls",
                      ms(process_cpu), ms(wall), ms(process_bound)));
}

void expect_cancelled(calrt::Job& job, const std::string& what) {
  require(job.wait(kClauseWait) == calrt::WaitResult::ready, what + ": Job_Wait NOT_READY");
  const calrt::JobStatus s = job.status();
  require(s.state == calrt::JobState::cancelled && s.code == CALRT_CANCELLED,
          fmt::format("{}: job is {} with code {}, expected CANCELLED", what,
                      calrt::to_string(s.state), calrt::code_name(s.code)));
}

void job_cancel_after_not_ready(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit_held(f, f.prefill);
  if (job.wait(milliseconds(10)) == calrt::WaitResult::ready) {
    throw ClauseSkip("the job completed within a 10 ms wait: nothing held it in flight");
  }
  job.cancel();
  expect_cancelled(job, "after Job_Cancel");
  { const calrt::Mapping mapping = f.prefill.input.map(0, kClauseWait); }
  { const calrt::Mapping mapping = f.prefill.output.map(0, kClauseWait); }
  job.cancel();
  expect_cancelled(job, "after cancelling a cancelled job");
}

void job_complete_after_not_ready(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit(f, f.prefill);
  if (job.wait(std::chrono::microseconds(1)) == calrt::WaitResult::ready) {
    throw ClauseSkip("the job completed within 1 us: no NOT_READY to recover from");
  }
  require(job.wait(kClauseWait) == calrt::WaitResult::ready, "the second Job_Wait was NOT_READY");
  const calrt::JobStatus s = job.status();
  require(s.state == calrt::JobState::completed,
          fmt::format("after a NOT_READY wait the job ended {} ({})", calrt::to_string(s.state),
                      calrt::code_name(s.code)));
  job.cancel();
  require(job.status().state == calrt::JobState::completed,
          "Job_Cancel of a completed job changed its state");
}

void job_destroy_cancels(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit_held(f, f.prefill);
  job.destroy();
  { const calrt::Mapping mapping = f.prefill.input.map(0, kClauseWait); }
  { const calrt::Mapping mapping = f.prefill.output.map(0, kClauseWait); }
  const calrt::DeviceState state = f.device.status().state;
  require(state == calrt::DeviceState::configured,
          fmt::format("device is {} after destroying its only job, expected CONFIGURED",
                      calrt::to_string(state)));
}

void job_watchdog(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  ctx.plan_hang(f.device);
  calrt::Job job = ctx.submit(f, f.prefill);
  const CallOutcome outcome = ctx.wait_raw(job.get(), kClauseWaitNs);
  expect_code(outcome, CALRT_DEVICE_HUNG, "Job_Wait on a hung job past the watchdog");
  const calrt::JobStatus s = job.status();
  require(s.state == calrt::JobState::timed_out && s.code == CALRT_DEVICE_HUNG,
          fmt::format("the hung job is {} with {}, expected TIMED_OUT with DEVICE_HUNG",
                      calrt::to_string(s.state), calrt::code_name(s.code)));
  const calrt::DeviceState state = f.device.status().state;
  require(
      state == calrt::DeviceState::faulted,
      fmt::format("device is {} after the watchdog, expected FAULTED", calrt::to_string(state)));
}

// CALRT_TIMEOUT_DEFAULT is 0, and means the runtime's bounded default, not "do not wait": a
// job that needs a moment is READY after one such wait. NEV.1 bounds the default from above;
// this clause from below.
void job_default_timeout_waits(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit(f, f.prefill);
  CalrtWaitResult result = CALRT_WAIT_NOT_READY;
  expect_code(ctx.wait_raw(job.get(), CALRT_TIMEOUT_DEFAULT, &result), CALRT_OK,
              "Job_Wait with CALRT_TIMEOUT_DEFAULT");
  require(result == CALRT_WAIT_READY,
          "Job_Wait with CALRT_TIMEOUT_DEFAULT returned NOT_READY on a prefill: the default "
          "was taken as no wait");
}

// Job_Wait's own `state` out field, which the C++ wrapper drops: written on every success,
// inside the enum, and telling the same as Job_Status. Each wait starts with a state the
// answer must overwrite, so an unwritten field shows.
void job_wait_state(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  const auto wait_with = [&](calrt::Job& job, uint64_t timeout_ns, CalrtJobState planted) {
    auto args = args_of<Calrt_Job_Wait_Args>();
    args.job = job.get();
    args.timeout_ns = timeout_ns;
    args.state = planted;
    expect_code(CONF_CALL(ctx, Job_Wait, args), CALRT_OK, "Job_Wait");
    const int state = static_cast<int>(args.state);
    require(state > 0 && state < CALRT_JOB_STATE_COUNT_,
            fmt::format("Job_Wait's state is {}, outside CalrtJobState", state));
    return args;
  };
  calrt::Job held = ctx.submit_held(f, f.prefill);
  const auto early = wait_with(held, 1000, CALRT_JOB_COMPLETED);
  if (early.result == CALRT_WAIT_NOT_READY) {
    require(early.state == CALRT_JOB_SUBMITTED || early.state == CALRT_JOB_RUNNING,
            fmt::format("a NOT_READY Job_Wait reports state {} (planted COMPLETED), not "
                        "SUBMITTED or RUNNING",
                        static_cast<int>(early.state)));
  }
  held.cancel();
  const auto late = wait_with(held, 30'000'000'000ull, CALRT_JOB_RUNNING);
  require(late.result == CALRT_WAIT_READY, "a cancelled job's 30 s Job_Wait is not READY");
  const calrt::JobStatus status = held.status();
  require(static_cast<int>(late.state) == static_cast<int>(status.state),
          fmt::format("Job_Wait reports state {} (planted RUNNING) but Job_Status {}",
                      static_cast<int>(late.state), static_cast<int>(status.state)));
}

}  // namespace

std::vector<Clause> clauses_job() {
  return {
      {"JOB.1", "JOB", "a job completes", job_completes},
      {"JOB.2", "JOB", "submit preconditions", job_preconditions},
      {"JOB.3", "JOB", "sync mode allows one job in flight", job_sync_limit},
      {"JOB.4", "JOB", "wait timeout is accurate", job_wait_timing},
      {"JOB.5", "JOB", "cancel after NOT_READY", job_cancel_after_not_ready},
      {"JOB.6", "JOB", "complete after NOT_READY", job_complete_after_not_ready},
      {"JOB.7", "JOB", "destroy cancels", job_destroy_cancels},
      {"JOB.8", "JOB", "watchdog ends a hung job", job_watchdog},
      {"JOB.9", "JOB", "wait reports the job's state", job_wait_state},
      {"JOB.10", "JOB", "the default timeout waits", job_default_timeout_waits},
      {"JOB.11", "JOB", "a wait neither oversleeps nor spins on the host", job_wait_host_cost},
  };
}

}  // namespace runner
