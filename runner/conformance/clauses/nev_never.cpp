// NEV: what must never happen. abi/CONFORMANCE.md#nev-what-must-never-happen
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

void nev_bounded_wait(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  ctx.plan_hang(f.device);
  calrt::Job job = ctx.submit(f, f.prefill);
  CalrtWaitResult result = CALRT_WAIT_READY;
  const CallOutcome outcome = ctx.wait_raw(job.get(), CALRT_TIMEOUT_DEFAULT, &result);
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
  const CallOutcome opened = CONF_CALL(ctx, Device_Create, create);
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
  const CallOutcome submitted =
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

// One out string of a raw call: the wrapper turns NULL into "" (string_or_empty), so a
// runtime's NULL is only visible here.
void require_string(const char* value, const std::string& what) {
  require(value != nullptr, what + " is NULL");
  require(std::memchr(value, '\0', 65536) != nullptr,
          what + " has no NUL terminator within 64 KiB");
}

void nev_null_strings(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  auto status = args_of<Calrt_Device_Status_Args>();
  status.device = f.device.get();
  expect_code(CONF_CALL(ctx, Device_Status, status), CALRT_OK, "Device_Status");
  require_string(status.runtime_version, "Device_Status runtime_version");
  require_string(status.firmware_version, "Device_Status firmware_version");
  require_string(status.driver_version, "Device_Status driver_version");
  require_string(status.device_name, "Device_Status device_name");
  auto info = args_of<Calrt_Calbin_GetInfo_Args>();
  info.calbin = f.calbin.get();
  expect_code(CONF_CALL(ctx, Calbin_GetInfo, info), CALRT_OK, "Calbin_GetInfo");
  require_string(info.calbin_version, "Calbin_GetInfo calbin_version");
  require_string(info.architecture, "Calbin_GetInfo architecture");
  require_string(info.runtime_abi, "Calbin_GetInfo runtime_abi");
  for (uint32_t m = 0; m < info.model_count; ++m) {
    auto model = args_of<Calrt_Calbin_GetModel_Args>();
    model.calbin = f.calbin.get();
    model.model_index = m;
    expect_code(CONF_CALL(ctx, Calbin_GetModel, model), CALRT_OK,
                fmt::format("Calbin_GetModel({})", m));
    require_string(model.name, fmt::format("Calbin_GetModel({}) name", m));
  }
  calrt::Job job = ctx.submit(f, f.prefill);
  (void)ctx.wait_raw(job.get(), kClauseWaitNs);
  auto job_status = args_of<Calrt_Job_Status_Args>();
  job_status.job = job.get();
  expect_code(CONF_CALL(ctx, Job_Status, job_status), CALRT_OK, "Job_Status");
  require_string(job_status.message, "Job_Status message of a completed job");
}

}  // namespace

std::vector<Clause> clauses_nev() {
  return {
      {"NEV.1", "NEV", "no unbounded wait", nev_bounded_wait},
      {"NEV.2", "NEV", "no buffer reuse while in flight", nev_buffer_reuse},
      {"NEV.3", "NEV", "no abort on bad enums", nev_bad_enums},
      {"NEV.4", "NEV", "no hang on a bad CSR", nev_bad_csr},
      {"NEV.5", "NEV", "no NULL out string", nev_null_strings},
  };
}

}  // namespace runner
