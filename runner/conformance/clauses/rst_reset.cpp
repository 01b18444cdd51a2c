// RST: reset. abi/CONFORMANCE.md#rst-reset
#include <fmt/format.h>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "runner/conformance/clauses/clauses.hpp"

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
  const CallOutcome allocated = CONF_CALL(ctx, Kv_Allocate, kv);
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

}  // namespace

std::vector<Clause> clauses_rst() {
  return {
      {"RST.1", "RST", "job_abort keeps configuration", rst_job_abort},
      {"RST.2", "RST", "chip reset drops configuration", rst_chip},
      {"RST.3", "RST", "FAULTED refuses new work", rst_faulted},
      {"RST.4", "RST", "reset levels are checked", rst_levels},
  };
}

}  // namespace runner
