// HDL: handles. abi/CONFORMANCE.md#hdl-handles
#include <fmt/format.h>
#include <cstring>
#include <filesystem>

#include "runner/conformance/clauses/clauses.hpp"

namespace runner {
namespace {

// One call per handle type on `handles`, each expected to be INVALID_HANDLE.
struct Handles {
  CalrtDevice* device = nullptr;
  CalrtCalbin* calbin = nullptr;
  CalrtBuffer* buffer = nullptr;
  CalrtJob* job = nullptr;
  CalrtKv* kv = nullptr;
};

void expect_invalid(ClauseContext& ctx, const Handles& h, const std::string& what) {
  auto status = args_of<Calrt_Device_Status_Args>();
  status.device = h.device;
  expect_code(CONF_CALL(ctx, Device_Status, status), CALRT_INVALID_HANDLE,
              "Device_Status of " + what);
  auto info = args_of<Calrt_Calbin_GetInfo_Args>();
  info.calbin = h.calbin;
  expect_code(CONF_CALL(ctx, Calbin_GetInfo, info), CALRT_INVALID_HANDLE,
              "Calbin_GetInfo of " + what);
  auto map = args_of<Calrt_Buffer_Map_Args>();
  map.buffer = h.buffer;
  map.timeout_ns = 1000000;
  expect_code(CONF_CALL(ctx, Buffer_Map, map), CALRT_INVALID_HANDLE, "Buffer_Map of " + what);
  auto wait = args_of<Calrt_Job_Wait_Args>();
  wait.job = h.job;
  wait.timeout_ns = 1000000;
  expect_code(CONF_CALL(ctx, Job_Wait, wait), CALRT_INVALID_HANDLE, "Job_Wait of " + what);
  auto cancel = args_of<Calrt_Job_Cancel_Args>();
  cancel.job = h.job;
  expect_code(CONF_CALL(ctx, Job_Cancel, cancel), CALRT_INVALID_HANDLE, "Job_Cancel of " + what);
  auto job_status = args_of<Calrt_Job_Status_Args>();
  job_status.job = h.job;
  expect_code(CONF_CALL(ctx, Job_Status, job_status), CALRT_INVALID_HANDLE,
              "Job_Status of " + what);
  auto kv = args_of<Calrt_Kv_Info_Args>();
  kv.kv = h.kv;
  expect_code(CONF_CALL(ctx, Kv_Info, kv), CALRT_INVALID_HANDLE, "Kv_Info of " + what);
}

void expect_release_invalid(ClauseContext& ctx, const Handles& h, const std::string& what) {
  auto buffer = args_of<Calrt_Buffer_Destroy_Args>();
  buffer.buffer = h.buffer;
  expect_code(CONF_CALL(ctx, Buffer_Destroy, buffer), CALRT_INVALID_HANDLE,
              "Buffer_Destroy of " + what);
  auto job = args_of<Calrt_Job_Destroy_Args>();
  job.job = h.job;
  expect_code(CONF_CALL(ctx, Job_Destroy, job), CALRT_INVALID_HANDLE, "Job_Destroy of " + what);
  auto kv = args_of<Calrt_Kv_Free_Args>();
  kv.kv = h.kv;
  expect_code(CONF_CALL(ctx, Kv_Free, kv), CALRT_INVALID_HANDLE, "Kv_Free of " + what);
  auto calbin = args_of<Calrt_Calbin_Destroy_Args>();
  calbin.calbin = h.calbin;
  expect_code(CONF_CALL(ctx, Calbin_Destroy, calbin), CALRT_INVALID_HANDLE,
              "Calbin_Destroy of " + what);
  auto device = args_of<Calrt_Device_Destroy_Args>();
  device.device = h.device;
  expect_code(CONF_CALL(ctx, Device_Destroy, device), CALRT_INVALID_HANDLE,
              "Device_Destroy of " + what);
}

void hdl_null(ClauseContext& ctx) {
  expect_invalid(ctx, Handles{}, "NULL");
  expect_release_invalid(ctx, Handles{}, "NULL");
}

template <class T>
T* forged(uintptr_t value) {
  return reinterpret_cast<T*>(value);
}

void hdl_never_issued(ClauseContext& ctx) {
  constexpr uintptr_t kForged = 0x7ff3c0de5a5a5a50u;
  expect_invalid(ctx,
                 {forged<CalrtDevice>(kForged), forged<CalrtCalbin>(kForged + 16),
                  forged<CalrtBuffer>(kForged + 32), forged<CalrtJob>(kForged + 48),
                  forged<CalrtKv>(kForged + 64)},
                 "a forged handle");
  // A live handle of another type was never issued as this type.
  const Fixture f = ctx.fixture(Setup::buffers);
  const auto device = reinterpret_cast<uintptr_t>(f.device.get());
  const auto buffer = reinterpret_cast<uintptr_t>(f.prefill.input.get());
  expect_invalid(ctx,
                 {forged<CalrtDevice>(buffer), forged<CalrtCalbin>(buffer),
                  forged<CalrtBuffer>(device), forged<CalrtJob>(buffer), forged<CalrtKv>(buffer)},
                 "a handle of another type");
}

Handles release_all(Fixture& f, calrt::Job& job) {
  Handles h{f.device.get(), f.calbin.get(), f.prefill.input.get(), job.get(), f.kv.get()};
  job.destroy();
  f.kv.free();
  f.prefill.input.destroy();
  f.calbin.destroy();
  f.device.destroy();
  return h;
}

void hdl_released(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit(f, f.prefill);
  job.wait(kClauseWait);
  const Handles h = release_all(f, job);
  expect_invalid(ctx, h, "a released handle");
  expect_release_invalid(ctx, h, "a released handle (double free)");
}

void hdl_device_children(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit(f, f.prefill);
  job.wait(kClauseWait);
  const Handles h{nullptr, f.calbin.get(), f.prefill.input.get(), job.get(), f.kv.get()};
  f.device.destroy();
  Handles children = h;
  children.device = nullptr;
  expect_invalid(ctx, children, "a child of a destroyed device");
  expect_release_invalid(ctx, children, "a child of a destroyed device");
  (void)f.kv.release();
  (void)job.release();
  (void)f.prefill.input.release();
  (void)f.calbin.release();
}

}  // namespace

std::vector<Clause> clauses_hdl() {
  return {
      {"HDL.1", "HDL", "NULL handles", hdl_null},
      {"HDL.2", "HDL", "never-issued handles", hdl_never_issued},
      {"HDL.3", "HDL", "released handles and double free", hdl_released},
      {"HDL.4", "HDL", "device destroy invalidates children", hdl_device_children},
  };
}

}  // namespace runner
