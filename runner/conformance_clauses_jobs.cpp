// Clauses JOB (submit, wait, timeout, cancel), PAR (parallel mode) and KV of
// abi/CONFORMANCE.md.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "abi/calrt_ext.hpp"
#include "runner/conformance_clauses.hpp"

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
  const Outcome outcome = ctx.wait_raw(job.get(), kClauseWaitNs);
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

void par_mode(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  f.device.set_parallel_mode(true);
  require(f.device.status().parallel_mode, "Device_Status: parallel_mode 0 after enabling it");
  expect_code(ctx.create_buffer(f, f.prefill.name(), CALRT_INPUT, 0), CALRT_OK,
              "Buffer_Create slot 0 in parallel mode");
  expect_code(ctx.create_buffer(f, f.prefill.name(), CALRT_INPUT, 1), CALRT_OK,
              "Buffer_Create slot 1 in parallel mode");
  expect_code(ctx.create_buffer(f, f.prefill.name(), CALRT_INPUT, 2), CALRT_INVALID_ARGUMENT,
              "Buffer_Create slot 2 in parallel mode");
  f.device.set_parallel_mode(false);
  require(!f.device.status().parallel_mode, "Device_Status: parallel_mode 1 after disabling it");
  expect_code(ctx.create_buffer(f, f.prefill.name(), CALRT_INPUT, 1), CALRT_INVALID_ARGUMENT,
              "Buffer_Create slot 1 after leaving parallel mode");
}

// A prefill model's buffers on `slot` with their own KV and the clause inputs.
struct SlotIo {
  ModelIo io;
  calrt::Kv kv;
};

SlotIo slot_io(ClauseContext& ctx, const Fixture& f, uint32_t slot) {
  SlotIo out{ctx.model_io(f, calrt::ModelType::prefill, slot), {}};
  out.kv = ctx.apply_kv(f, out.io);
  ctx.write_inputs(out.io, kJobTokens);
  return out;
}

void par_one_job_per_slot(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::configured);
  f.device.set_parallel_mode(true);
  SlotIo ping = slot_io(ctx, f, 0);
  SlotIo pong = slot_io(ctx, f, 1);
  SlotIo third = slot_io(ctx, f, 0);
  const bool held = ctx.has_fault();
  if (held) {
    // Both computes slowed a millionfold: in flight whatever the device's clock does.
    const std::string slow =
        "  - kind: slow_completion\n    during: prefill\n    factor: 1000000\n    at_op: ";
    ctx.set_plan(f.device, "seed: 1\nfaults:\n" + slow + "1\n" + slow + "2\n");
  }
  calrt::Job a = ctx.submit(f, ping.io);
  calrt::Job b = ctx.submit(f, pong.io);
  const auto in_flight = [&] { return !a.status().is_final() && !b.status().is_final(); };
  // On a device whose clock runs on its own (paced, hardware) a job can end between the
  // check and the call; a success is only a failure when both jobs were still in flight
  // after it.
  const auto expect_refused = [&](const Outcome& outcome, CalrtCode code, const std::string& what) {
    if (outcome.code != code && !in_flight()) {
      throw ClauseSkip("a slot's job ended during the check of: " + what);
    }
    expect_code(outcome, code, what);
  };
  const bool both_in_flight = in_flight();
  if (both_in_flight) {
    expect_refused(ctx.submit_raw(f, third.io.name(), third.io.input.get(), third.io.output.get()),
                   CALRT_BUSY, "a third Job_Submit while ping and pong are in flight");
    auto mode = args_of<Calrt_Device_SetParallelMode_Args>();
    mode.device = f.device.get();
    mode.enable = 0;
    expect_refused(CONF_CALL(ctx, Device_SetParallelMode, mode), CALRT_WRONG_STATE,
                   "Device_SetParallelMode while jobs are in flight");
  }
  if (held) {
    a.cancel();
    b.cancel();
    ctx.set_plan(f.device, "");
    a = ctx.submit(f, ping.io);
    b = ctx.submit(f, pong.io);
  }
  for (calrt::Job* job : {&a, &b}) {
    expect_final(*job, calrt::JobState::completed, "a slot's job");
  }
  if (!both_in_flight) {
    throw ClauseSkip("the jobs were final right after submission: the slot limit is unchecked");
  }
}

std::vector<std::byte> run_and_read(ClauseContext& ctx, const Fixture& f, ModelIo& io) {
  calrt::Job job = ctx.submit(f, io);
  expect_final(job, calrt::JobState::completed, "the job run alone");
  const calrt::Mapping mapping = io.output.map(io.logits_output, kClauseWait);
  return {mapping.bytes().begin(), mapping.bytes().end()};
}

void par_no_crosstalk(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  const std::vector<std::byte> alone = run_and_read(ctx, f, f.prefill);
  f.kv.free();
  f.prefill.input.destroy();
  f.prefill.output.destroy();
  f.device.set_parallel_mode(true);
  SlotIo ping = slot_io(ctx, f, 0);
  SlotIo pong = slot_io(ctx, f, 1);
  calrt::Job a = ctx.submit(f, ping.io);
  calrt::Job b = ctx.submit(f, pong.io);
  std::vector<std::vector<std::byte>> outputs;
  for (auto [job, io] : {std::pair{&a, &ping.io}, std::pair{&b, &pong.io}}) {
    expect_final(*job, calrt::JobState::completed, "a slot's job");
    const calrt::Mapping mapping = io->output.map(io->logits_output, kClauseWait);
    outputs.emplace_back(mapping.bytes().begin(), mapping.bytes().end());
  }
  require(outputs[0] == outputs[1], "ping and pong outputs differ for the same inputs");
  require(outputs[0] == alone, "the parallel outputs differ from the same input run alone");
}

Outcome allocate(ClauseContext& ctx, const Fixture& f, uint32_t tokens, calrt::Kv* out) {
  auto args = args_of<Calrt_Kv_Allocate_Args>();
  args.calbin = f.calbin.get();
  args.capacity_tokens = tokens;
  const Outcome outcome = CONF_CALL(ctx, Kv_Allocate, args);
  calrt::Kv adopted(args.kv, {ctx.api});
  if (out != nullptr) {
    *out = std::move(adopted);
  }
  return outcome;
}

void kv_accounting(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::configured);
  const calrt::KvCapacity before = f.calbin.kv_capacity();
  constexpr uint32_t kTokens = 32;
  calrt::Kv kv = calrt::Kv::allocate(f.calbin, kTokens);
  const calrt::KvInfo info = kv.info();
  require(info.capacity_tokens == kTokens && info.filled_tokens == 0,
          fmt::format("Kv_Info: capacity {} filled {}, expected {} and 0", info.capacity_tokens,
                      info.filled_tokens, kTokens));
  const calrt::KvCapacity during = f.calbin.kv_capacity();
  require(during.free_tokens + kTokens == before.free_tokens &&
              during.live_handles == before.live_handles + 1,
          fmt::format("Kv_Capacity after allocating {}: free {} -> {}, live {} -> {}", kTokens,
                      before.free_tokens, during.free_tokens, before.live_handles,
                      during.live_handles));
  kv.free();
  const calrt::KvCapacity after = f.calbin.kv_capacity();
  require(
      after.free_tokens == before.free_tokens && after.live_handles == before.live_handles,
      fmt::format("Kv_Capacity after Kv_Free: free {} live {}, expected {} and {}",
                  after.free_tokens, after.live_handles, before.free_tokens, before.live_handles));
}

void kv_bad_sizes(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::configured);
  expect_code(allocate(ctx, f, 0, nullptr), CALRT_INVALID_ARGUMENT, "Kv_Allocate(0)");
  expect_code(allocate(ctx, f, f.info.context + 1, nullptr), CALRT_OUT_OF_RANGE,
              "Kv_Allocate(context + 1)");
}

void kv_exhaustion(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::configured);
  const calrt::KvCapacity capacity = f.calbin.kv_capacity();
  const uint64_t bound = capacity.total_tokens / std::max<uint32_t>(f.info.context, 1) + 2;
  std::vector<calrt::Kv> live;
  uint64_t held = 0;
  for (uint64_t i = 0; i <= std::min<uint64_t>(bound, 256); ++i) {
    calrt::Kv kv;
    const Outcome outcome = allocate(ctx, f, f.info.context, &kv);
    if (!outcome.ok()) {
      expect_code(outcome, CALRT_KV_EXHAUSTED, "Kv_Allocate past the reservation");
      require(outcome.message.find_first_of("0123456789") != std::string::npos,
              "KV_EXHAUSTED message '" + outcome.message + "' gives no free token count");
      return;
    }
    held += f.info.context;
    require(held <= capacity.total_tokens,
            fmt::format("Kv_Allocate succeeded with {} tokens live, total_tokens is {}", held,
                        capacity.total_tokens));
    live.push_back(std::move(kv));
  }
  throw ClauseFailure(fmt::format("Kv_Allocate({}) never refused within {} allocations",
                                  f.info.context, live.size()));
}

void kv_overflow(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  const calrt::Kv kv = ctx.apply_kv(f, f.prefill, kJobTokens / 2);
  ctx.write_inputs(f.prefill, kJobTokens);
  calrt::Job job;
  const Outcome submitted =
      ctx.submit_raw(f, f.prefill.name(), f.prefill.input.get(), f.prefill.output.get(), &job);
  if (!submitted.ok()) {
    expect_code(submitted, CALRT_KV_EXHAUSTED, CALRT_OUT_OF_RANGE,
                "Job_Submit of more tokens than the KV holds");
    return;
  }
  require(job.wait(kClauseWait) == calrt::WaitResult::ready, "Job_Wait: NOT_READY");
  const calrt::JobStatus s = job.status();
  require(s.state == calrt::JobState::failed,
          fmt::format("a prefill of {} tokens on a KV of {} ended {}, expected FAILED", kJobTokens,
                      kJobTokens / 2, calrt::to_string(s.state)));
  expect_code(Outcome{s.code, s.message}, CALRT_KV_EXHAUSTED, CALRT_OUT_OF_RANGE,
              "the overflowing job's code");
}

void kv_fill_and_clear(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit(f, f.prefill);
  require(job.wait(kClauseWait) == calrt::WaitResult::ready, "Job_Wait: NOT_READY");
  require(job.status().state == calrt::JobState::completed, "the prefill did not complete");
  const calrt::KvInfo filled = f.kv.info();
  require(filled.filled_tokens == kJobTokens,
          fmt::format("fill level {} after a prefill of {}", filled.filled_tokens, kJobTokens));
  f.kv.clear();
  const calrt::KvInfo cleared = f.kv.info();
  require(cleared.filled_tokens == 0 && cleared.capacity_tokens == filled.capacity_tokens,
          fmt::format("after Kv_Clear: fill {} capacity {}, expected 0 and {}",
                      cleared.filled_tokens, cleared.capacity_tokens, filled.capacity_tokens));
}

Outcome apply(ClauseContext& ctx, CalrtKv* kv, CalrtBuffer* buffer) {
  auto args = args_of<Calrt_Kv_Apply_Args>();
  args.kv = kv;
  args.input = buffer;
  return CONF_CALL(ctx, Kv_Apply, args);
}

void kv_freed_and_busy(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Kv other = ctx.apply_kv(f, f.prefill);
  CalrtKv* freed = other.get();
  other.free();
  expect_code(apply(ctx, freed, f.prefill.input.get()), CALRT_INVALID_HANDLE,
              "Kv_Apply of a freed KV");
  expect_code(ctx.submit_raw(f, f.prefill.name(), f.prefill.input.get(), f.prefill.output.get()),
              CALRT_WRONG_STATE, "Job_Submit with the buffer's KV freed");
  expect_code(apply(ctx, f.kv.get(), f.prefill.output.get()), CALRT_INVALID_ARGUMENT,
              "Kv_Apply to an output buffer");
  f.kv.apply(f.prefill.input);
  calrt::Job job = ctx.submit_held(f, f.prefill);
  auto free_args = args_of<Calrt_Kv_Free_Args>();
  free_args.kv = f.kv.get();
  expect_code(CONF_CALL(ctx, Kv_Free, free_args), CALRT_BUSY, "Kv_Free while a job uses it");
  auto clear = args_of<Calrt_Kv_Clear_Args>();
  clear.kv = f.kv.get();
  expect_code(CONF_CALL(ctx, Kv_Clear, clear), CALRT_BUSY, "Kv_Clear while a job uses it");
  require(!job.status().is_final(), "the held job became final during the checks");
  job.cancel();
}

}  // namespace

std::vector<Clause> conformance_clauses_jobs() {
  return {
      {"JOB.1", "JOB", "a job completes", job_completes},
      {"JOB.2", "JOB", "submit preconditions", job_preconditions},
      {"JOB.3", "JOB", "sync mode allows one job in flight", job_sync_limit},
      {"JOB.4", "JOB", "wait timeout is accurate", job_wait_timing},
      {"JOB.5", "JOB", "cancel after NOT_READY", job_cancel_after_not_ready},
      {"JOB.6", "JOB", "complete after NOT_READY", job_complete_after_not_ready},
      {"JOB.7", "JOB", "destroy cancels", job_destroy_cancels},
      {"JOB.8", "JOB", "watchdog ends a hung job", job_watchdog},
      {"PAR.1", "PAR", "parallel mode and slots", par_mode},
      {"PAR.2", "PAR", "one job per slot", par_one_job_per_slot},
      {"PAR.3", "PAR", "no crosstalk between slots", par_no_crosstalk},
      {"KV.1", "KV", "allocate, info and capacity", kv_accounting},
      {"KV.2", "KV", "bad sizes", kv_bad_sizes},
      {"KV.3", "KV", "exhaustion is an error", kv_exhaustion},
      {"KV.4", "KV", "overflow is never success", kv_overflow},
      {"KV.5", "KV", "fill level and clear", kv_fill_and_clear},
      {"KV.6", "KV", "freed and busy KV", kv_freed_and_busy},
  };
}

}  // namespace runner
