// Clauses RST (reset), THR (threads) and NEV (what must never happen) of
// abi/CONFORMANCE.md.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "runner/conformance_clauses.hpp"

namespace runner {
namespace {

using std::chrono::milliseconds;

void expect_state(const calrt::Device& device, calrt::DeviceState want, const std::string& when) {
  const calrt::DeviceState state = device.status().state;
  require(state == want, fmt::format("device is {} {}, expected {}", calrt::to_string(state), when,
                                     calrt::to_string(want)));
}

void expect_completes(ClauseContext& ctx, const Fixture& f, const ModelIo& io,
                      const std::string& when) {
  calrt::Job job = ctx.submit(f, io);
  expect_final(job, calrt::JobState::completed, when);
}

void rst_job_abort(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  const uint64_t resets = f.device.status().reset_count;
  calrt::Job job = ctx.submit_held(f, f.prefill);
  const calrt::DeviceState after = f.device.reset(calrt::ResetLevel::job_abort, kClauseWait);
  require(after == calrt::DeviceState::configured,
          fmt::format("Device_Reset(JOB_ABORT) state out field {}, expected CONFIGURED",
                      calrt::to_string(after)));
  expect_state(f.device, calrt::DeviceState::configured, "after a job_abort reset");
  const calrt::JobStatus s = job.status();
  require(s.state == calrt::JobState::cancelled,
          fmt::format("the in-flight job is {} after the reset, expected CANCELLED",
                      calrt::to_string(s.state)));
  require(f.device.status().reset_count == resets + 1, "reset_count did not grow by one");
  require(f.calbin.info().configured, "the calbin lost its configuration in a job_abort reset");
  ctx.set_plan(f.device, "");
  expect_completes(ctx, f, f.prefill, "after a job_abort reset");
}

void rst_chip(ClauseContext& ctx) {
  for (const calrt::ResetLevel level : {calrt::ResetLevel::chip, calrt::ResetLevel::full}) {
    const char* name = level == calrt::ResetLevel::chip ? "CHIP" : "FULL";
    Fixture f = ctx.fixture(Setup::configured);
    const calrt::DeviceState after = f.device.reset(level, kClauseWait);
    require(after == calrt::DeviceState::open,
            fmt::format("Device_Reset({}) state out field {}, expected OPEN", name,
                        calrt::to_string(after)));
    expect_state(f.device, calrt::DeviceState::open, fmt::format("after a {} reset", name));
    require(!f.calbin.info().configured,
            fmt::format("the calbin is still configured after a {} reset", name));
    expect_code(ctx.create_buffer(f, ctx.manifest.models.front().name, CALRT_INPUT),
                CALRT_NOT_CONFIGURED, fmt::format("Buffer_Create after a {} reset", name));
    f.calbin.configure(kClauseWait);
    f.info = f.calbin.info();
    f.prefill = ctx.model_io(f, calrt::ModelType::prefill);
    f.kv = ctx.apply_kv(f, f.prefill);
    ctx.write_inputs(f.prefill, kJobTokens);
    expect_completes(ctx, f, f.prefill, fmt::format("after a {} reset and configure", name));
  }
}

// Fails the prefill's input DMA: a device-class fault that job_abort clears.
void fault_dma(ClauseContext& ctx, const Fixture& f) {
  ctx.set_plan(f.device,
               "seed: 1\nfaults:\n  - kind: dma_h2d\n    during: prefill\n    at_op: 1\n");
  calrt::Job job = ctx.submit(f, f.prefill);
  (void)ctx.wait_raw(job.get(), kClauseWaitNs);
  expect_state(f.device, calrt::DeviceState::faulted, "after a DMA error");
}

void rst_faulted(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  // Created before the fault: Calbin_Create itself is refused on a FAULTED device.
  calrt::Calbin second = calrt::Calbin::create(f.device, ctx.options.calbin, kClauseWait);
  fault_dma(ctx, f);
  expect_code(ctx.submit_raw(f, f.prefill.name(), f.prefill.input.get(), f.prefill.output.get()),
              CALRT_WRONG_STATE, "Job_Submit on a FAULTED device");
  expect_code(ctx.create_buffer(f, f.prefill.name(), CALRT_INPUT), CALRT_WRONG_STATE,
              "Buffer_Create on a FAULTED device");
  auto kv = args_of<Calrt_Kv_Allocate_Args>();
  kv.calbin = f.calbin.get();
  kv.capacity_tokens = 8;
  const Outcome allocated = CONF_CALL(ctx, Kv_Allocate, kv);
  const calrt::Kv adopted_kv(kv.kv, {ctx.api});
  expect_code(allocated, CALRT_WRONG_STATE, "Kv_Allocate on a FAULTED device");
  auto configure = args_of<Calrt_Calbin_Configure_Args>();
  configure.calbin = second.get();
  configure.timeout_ns = kClauseWaitNs;
  expect_code(CONF_CALL(ctx, Calbin_Configure, configure), CALRT_WRONG_STATE,
              "Calbin_Configure on a FAULTED device");
  (void)f.device.chip_status(0);
  (void)f.calbin.info();
  (void)f.kv.info();
  const calrt::DeviceState after = f.device.reset(calrt::ResetLevel::job_abort, kClauseWait);
  require(after == calrt::DeviceState::configured,
          fmt::format("Device_Reset(JOB_ABORT) after a DMA error: state {}, expected CONFIGURED",
                      calrt::to_string(after)));
  expect_completes(ctx, f, f.prefill, "after the reset");
}

void rst_levels(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  for (const int level : {0, int{CALRT_RESET_LEVEL_COUNT_}}) {
    auto args = args_of<Calrt_Device_Reset_Args>();
    args.device = f.device.get();
    set_raw(args.level, level);
    args.timeout_ns = kClauseWaitNs;
    expect_code(CONF_CALL(ctx, Device_Reset, args), CALRT_INVALID_ARGUMENT,
                fmt::format("Device_Reset(level {})", level));
  }
  ctx.set_plan(f.device,
               "seed: 1\nfaults:\n  - kind: chip_hang\n    during: prefill\n    at_op: 1\n");
  calrt::Job job = ctx.submit(f, f.prefill);
  (void)ctx.wait_raw(job.get(), kClauseWaitNs);
  expect_state(f.device, calrt::DeviceState::faulted, "after a chip hang");
  const calrt::DeviceState low = f.device.reset(calrt::ResetLevel::job_abort, kClauseWait);
  require(low == calrt::DeviceState::faulted,
          fmt::format("Device_Reset(JOB_ABORT) of a chip hang (needs CORES): state {}, expected "
                      "FAULTED",
                      calrt::to_string(low)));
  expect_state(f.device, calrt::DeviceState::faulted, "after a reset below the fault's level");
  const calrt::DeviceState enough = f.device.reset(calrt::ResetLevel::cores, kClauseWait);
  require(enough == calrt::DeviceState::configured,
          fmt::format("Device_Reset(CORES) of a chip hang: state {}, expected CONFIGURED",
                      calrt::to_string(enough)));
}

void thr_concurrent(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::configured);
  constexpr int kThreads = 4;
  constexpr int kIterations = 200;
  std::vector<calrt::Buffer> buffers;
  for (int t = 0; t < kThreads; ++t) {
    buffers.push_back(
        calrt::Buffer::create(f.calbin, ctx.manifest.models.front().name, calrt::Direction::input));
  }
  std::mutex mutex;
  std::string first_error;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < kIterations; ++i) {
          (void)f.device.status();
          (void)f.device.chip_status(0);
          (void)f.calbin.info();
          (void)f.calbin.kv_capacity();
          {
            const calrt::Mapping mapping = buffers[t].map(0, kClauseWait);
            std::memset(mapping.bytes().data(), t, mapping.size());
          }
          calrt::Kv kv = calrt::Kv::allocate(f.calbin, 1);
          kv.free();
        }
      } catch (const std::exception& error) {
        const std::lock_guard lock(mutex);
        if (first_error.empty()) {
          first_error = fmt::format("thread {}: {}", t, error.what());
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  require(first_error.empty(), first_error);
  for (int t = 0; t < kThreads; ++t) {
    const calrt::Mapping mapping = buffers[t].map(0, kClauseWait);
    for (const std::byte b : mapping.bytes()) {
      require(b == static_cast<std::byte>(t),
              fmt::format("buffer of thread {} was overwritten", t));
    }
  }
  const uint32_t live = f.calbin.kv_capacity().live_handles;
  require(live == 0, fmt::format("{} KV handles live after every thread freed its own", live));
}

void thr_no_blocking(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  ctx.plan_hang(f.device);
  calrt::Job job = ctx.submit(f, f.prefill);
  CalrtJob* raw = job.get();
  std::atomic<bool> waiting{true};
  Outcome waited;
  CalrtWaitResult result = CALRT_WAIT_NOT_READY;
  std::thread waiter([&] {
    auto args = args_of<Calrt_Job_Wait_Args>();
    args.job = raw;
    args.timeout_ns =
        static_cast<uint64_t>(std::chrono::nanoseconds(std::chrono::seconds(2)).count());
    try {
      waited = CONF_CALL(ctx, Job_Wait, args);
      result = args.result;
    } catch (const std::exception& error) {
      waited = Outcome{CALRT_INTERNAL, error.what()};
    }
    waiting = false;
  });
  std::string slow;
  for (int i = 0; i < 20; ++i) {
    const auto begin = std::chrono::steady_clock::now();
    (void)f.device.status();
    (void)f.calbin.kv_capacity();
    const auto took = std::chrono::steady_clock::now() - begin;
    if (took > std::chrono::seconds(1) && slow.empty()) {
      slow = fmt::format("a Device_Status took {} ms while another thread waited",
                         std::chrono::duration_cast<milliseconds>(took).count());
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  job.cancel();
  waiter.join();
  require(slow.empty(), slow);
  require(waited.ok(),
          "the waiter's Job_Wait failed: " + calrt::code_name(waited.code) + " " + waited.message);
  if (result == CALRT_WAIT_READY) {
    require(job.status().state == calrt::JobState::cancelled,
            "the waiter returned READY but the job is not CANCELLED");
  }
  require(job.wait(kClauseWait) == calrt::WaitResult::ready &&
              job.status().state == calrt::JobState::cancelled,
          "after a cancel from another thread the job is not READY/CANCELLED");
}

void nev_bounded_wait(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  ctx.plan_hang(f.device);
  calrt::Job job = ctx.submit(f, f.prefill);
  CalrtWaitResult result = CALRT_WAIT_READY;
  const Outcome outcome = ctx.wait_raw(job.get(), CALRT_TIMEOUT_DEFAULT, &result);
  if (outcome.ok()) {
    require(result == CALRT_WAIT_NOT_READY || job.status().state != calrt::JobState::completed,
            "Job_Wait(DEFAULT) on a hung job reported it COMPLETED");
  } else {
    expect_code(outcome, CALRT_DEVICE_HUNG, "Job_Wait(DEFAULT) on a hung job");
  }
  // The hang left this device FAULTED. Where devices are shared (sessions of `simdev serve`
  // attach to one device) the next fixture would get it in that state, so clear it first.
  (void)f.device.reset(calrt::ResetLevel::job_abort);
  calrt::Job second;
  {
    Fixture g = ctx.fixture(Setup::ready);
    ctx.plan_hang(g.device);
    second = ctx.submit(g, g.prefill);
    (void)second.wait(milliseconds(1));
    const auto begin = std::chrono::steady_clock::now();
    g.device.destroy();
    const auto took = std::chrono::steady_clock::now() - begin;
    require(took < std::chrono::seconds(5),
            fmt::format("Device_Destroy with a hung job in flight took {} ms",
                        std::chrono::duration_cast<milliseconds>(took).count()));
  }
  (void)second.release();
}

void nev_buffer_reuse(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  void* stale = nullptr;
  uint64_t size = 0;
  {
    auto map = args_of<Calrt_Buffer_Map_Args>();
    map.buffer = f.prefill.input.get();
    map.tensor_index = f.prefill.token_input;
    map.timeout_ns = kClauseWaitNs;
    expect_code(CONF_CALL(ctx, Buffer_Map, map), CALRT_OK, "Buffer_Map");
    stale = map.data;
    size = map.size_bytes;
    auto unmap = args_of<Calrt_Buffer_Unmap_Args>();
    unmap.buffer = f.prefill.input.get();
    unmap.tensor_index = f.prefill.token_input;
    expect_code(CONF_CALL(ctx, Buffer_Unmap, unmap), CALRT_OK, "Buffer_Unmap");
  }
  calrt::Job job = ctx.submit(f, f.prefill);
  if (job.status().is_final()) {
    throw ClauseSkip("the job was final right after submission: no in-flight window to write in");
  }
  // The host bug this clause is about: a write through a pointer kept past unmap.
  std::memset(stale, 0x11, std::min<uint64_t>(size, 16));
  require(job.wait(kClauseWait) == calrt::WaitResult::ready, "Job_Wait: NOT_READY");
  const calrt::JobStatus s = job.status();
  if (s.state == calrt::JobState::completed) {
    if (ctx.spec.kind == calrt::DeviceKind::sim) {
      throw ClauseFailure(
          "a simulated device let a job complete after the host wrote its input in flight");
    }
    throw ClauseSkip("the runtime does not detect host writes to in-flight buffers");
  }
  require(s.state == calrt::JobState::failed && s.code == CALRT_BUFFER_REUSE,
          fmt::format("the job ended {} with {}, expected FAILED with BUFFER_REUSE",
                      calrt::to_string(s.state), calrt::code_name(s.code)));
}

void nev_bad_enums(ClauseContext& ctx) {
  auto create = args_of<Calrt_Device_Create_Args>();
  set_raw(create.kind, CALRT_DEVICE_KIND_COUNT_);
  const Outcome opened = CONF_CALL(ctx, Device_Create, create);
  const calrt::Device adopted(create.device, {ctx.api});
  expect_code(opened, CALRT_INVALID_ARGUMENT, "Device_Create(kind CALRT_DEVICE_KIND_COUNT_)");
  const Fixture f = ctx.fixture(Setup::configured);
  expect_code(ctx.create_buffer(f, ctx.manifest.models.front().name, CALRT_DIRECTION_COUNT_),
              CALRT_INVALID_ARGUMENT, "Buffer_Create(direction CALRT_DIRECTION_COUNT_)");
  auto reset = args_of<Calrt_Device_Reset_Args>();
  reset.device = f.device.get();
  set_raw(reset.level, 7);
  expect_code(CONF_CALL(ctx, Device_Reset, reset), CALRT_INVALID_ARGUMENT, "Device_Reset(level 7)");
}

void nev_bad_csr(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  f.prefill.input.set_csr(f.prefill.cur_seq_len_csr, uint64_t{f.info.prefill_chunk} * 4);
  f.prefill.input.set_csr(f.prefill.past_kv_csr, uint64_t{kJobKvTokens} * 16);
  calrt::Job job;
  const Outcome submitted =
      ctx.submit_raw(f, f.prefill.name(), f.prefill.input.get(), f.prefill.output.get(), &job);
  if (!submitted.ok()) {
    require(CALRT_CODE_FAULT_CLASS(submitted.code) == CALRT_FAULT_REQUEST,
            "Job_Submit with bad CSRs refused with " + calrt::code_name(submitted.code) +
                ", not a request-class code");
    return;
  }
  require(job.wait(kClauseWait) == calrt::WaitResult::ready,
          "a job with bad CSRs did not reach a final state within 30 s of device time");
  const calrt::JobStatus s = job.status();
  if (s.state == calrt::JobState::failed) {
    require(s.fault_class() == calrt::FaultClass::request, "a job with bad CSRs failed with " +
                                                               calrt::code_name(s.code) +
                                                               ", not a request-class code");
  }
}

}  // namespace

std::vector<Clause> conformance_clauses_device() {
  return {
      {"RST.1", "RST", "job_abort keeps configuration", rst_job_abort},
      {"RST.2", "RST", "chip reset drops configuration", rst_chip},
      {"RST.3", "RST", "FAULTED refuses new work", rst_faulted},
      {"RST.4", "RST", "reset levels are checked", rst_levels},
      {"THR.1", "THR", "concurrent calls are serialised", thr_concurrent},
      {"THR.2", "THR", "no call blocks past its deadline", thr_no_blocking},
      {"NEV.1", "NEV", "no unbounded wait", nev_bounded_wait},
      {"NEV.2", "NEV", "no buffer reuse while in flight", nev_buffer_reuse},
      {"NEV.3", "NEV", "no abort on bad enums", nev_bad_enums},
      {"NEV.4", "NEV", "no hang on a bad CSR", nev_bad_csr},
  };
}

}  // namespace runner
