// Clauses VER (version negotiation), HDL (handles) and ERR (errors) of abi/CONFORMANCE.md.
#include <fmt/format.h>

#include <cstring>
#include <filesystem>

#include "runner/conformance_clauses.hpp"

namespace runner {
namespace {

void ver_table_major(ClauseContext& ctx) {
  const CalrtApi* table = ctx.api.table();
  require(table->abi_major == CALRT_ABI_MAJOR,
          fmt::format("table abi_major {}, expected {}", table->abi_major, CALRT_ABI_MAJOR));
  if (ctx.get_api != nullptr) {
    require(ctx.get_api(CALRT_ABI_MAJOR) != nullptr, "CalrtGetApi(CALRT_ABI_MAJOR) returned NULL");
  }
  const calrt::Device device = ctx.open_device();
  const calrt::DeviceStatus status = device.status();
  require(status.abi_major == table->abi_major && status.abi_minor == table->abi_minor &&
              status.abi_patch == table->abi_patch,
          fmt::format("Device_Status reports ABI {}.{}.{}, the table {}.{}.{}", status.abi_major,
                      status.abi_minor, status.abi_patch, table->abi_major, table->abi_minor,
                      table->abi_patch));
}

void ver_wrong_major(ClauseContext& ctx) {
  if (ctx.get_api == nullptr) {
    throw ClauseSkip("no CalrtGetApi entry point for this backend (a table passed directly)");
  }
  for (const uint32_t major : {uint32_t{CALRT_ABI_MAJOR + 1}, uint32_t{UINT32_MAX}}) {
    require(ctx.get_api(major) == nullptr,
            fmt::format("CalrtGetApi({}) returned a table, expected NULL", major));
  }
}

void ver_table_size(ClauseContext& ctx) {
  const CalrtApi* table = ctx.api.table();
  const size_t header = offsetof(CalrtApi, Error_GetCode) + sizeof(table->Error_GetCode);
  require(table->struct_size >= header,
          fmt::format("table struct_size {} ends before Error_GetCode ({})", table->struct_size,
                      header));
  if (table->abi_major == CALRT_ABI_MAJOR && table->abi_minor >= CALRT_ABI_MINOR) {
    require(table->struct_size >= CALRT_API_STRUCT_SIZE,
            fmt::format("table of ABI minor {} has struct_size {}, below CALRT_API_STRUCT_SIZE {}",
                        table->abi_minor, table->struct_size, CALRT_API_STRUCT_SIZE));
  }
}

// True when looking up the entry throws UNIMPLEMENTED.
template <class Lookup>
bool unimplemented(Lookup&& lookup) {
  try {
    lookup();
  } catch (const calrt::Error& error) {
    return error.code() == CALRT_UNIMPLEMENTED;
  }
  return false;
}

void ver_missing_entry(ClauseContext& ctx) {
  const CalrtApi* table = ctx.api.table();
  CalrtApi copy{};
  std::memcpy(&copy, table, std::min(sizeof(copy), table->struct_size));
  copy.struct_size = std::min(sizeof(copy), table->struct_size);
  copy.Kv_Clear = nullptr;
  const calrt::Api nulled(&copy);
  require(unimplemented([&] { (void)CALRT_HPP_ENTRY(nulled, Kv_Clear); }),
          "a NULL Kv_Clear entry was not reported as UNIMPLEMENTED");
  CalrtApi cut = copy;
  cut.struct_size = offsetof(CalrtApi, Kv_Info);
  const calrt::Api shortened(&cut);
  require(unimplemented([&] { (void)CALRT_HPP_ENTRY(shortened, Kv_Info); }),
          "an entry beyond struct_size (Kv_Info) was not reported as UNIMPLEMENTED");
  require(!unimplemented([&] { (void)CALRT_HPP_ENTRY(shortened, Kv_Free); }),
          "an entry within struct_size (Kv_Free) was reported as UNIMPLEMENTED");
}

void ver_smaller_struct(ClauseContext& ctx) {
  for (const size_t size : {size_t{CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE - 1}, size_t{0}}) {
    auto create = args_of<Calrt_Device_Create_Args>();
    create.struct_size = size;
    create.kind = CALRT_DEVICE_SIM;
    const Outcome outcome = CONF_CALL(ctx, Device_Create, create);
    if (create.device != nullptr) {
      auto destroy = args_of<Calrt_Device_Destroy_Args>();
      destroy.device = create.device;
      (void)CONF_CALL(ctx, Device_Destroy, destroy);
      throw ClauseFailure(fmt::format("Device_Create with struct_size {} created a device", size));
    }
    expect_code(outcome, CALRT_STRUCT_TOO_SMALL,
                fmt::format("Device_Create with struct_size {}", size));
  }
  Fixture f = ctx.fixture(Setup::ready);
  auto status = args_of<Calrt_Device_Status_Args>();
  status.struct_size -= 1;
  status.device = f.device.get();
  status.abi_major = 0xFFFFFFFFu;
  expect_code(CONF_CALL(ctx, Device_Status, status), CALRT_STRUCT_TOO_SMALL,
              "Device_Status with struct_size - 1");
  require(status.abi_major == 0xFFFFFFFFu, "Device_Status wrote out fields of a too-small struct");
  auto info = args_of<Calrt_Calbin_GetInfo_Args>();
  info.struct_size -= 1;
  info.calbin = f.calbin.get();
  expect_code(CONF_CALL(ctx, Calbin_GetInfo, info), CALRT_STRUCT_TOO_SMALL,
              "Calbin_GetInfo with struct_size - 1");
  require(info.model_count == 0, "Calbin_GetInfo wrote out fields of a too-small struct");
  calrt::Job job = ctx.submit(f, f.prefill);
  auto wait = args_of<Calrt_Job_Wait_Args>();
  wait.struct_size = 0;
  wait.job = job.get();
  wait.timeout_ns = 1;
  expect_code(CONF_CALL(ctx, Job_Wait, wait), CALRT_STRUCT_TOO_SMALL,
              "Job_Wait with struct_size 0");
  job.wait(kClauseWait);
}

// An args struct followed by bytes the runtime must neither need nor write.
template <class Args>
struct Padded {
  Args args;
  unsigned char tail[64];
  Padded() {
    std::memset(static_cast<void*>(this), 0xA5, sizeof(*this));
    args = args_of<Args>();
    args.struct_size = sizeof(Args) + sizeof(tail);
  }
  bool tail_intact() const {
    for (const unsigned char byte : tail) {
      if (byte != 0xA5) {
        return false;
      }
    }
    return true;
  }
};

void ver_larger_struct(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  Padded<Calrt_Device_Status_Args> status;
  status.args.device = f.device.get();
  expect_code(CONF_CALL(ctx, Device_Status, status.args), CALRT_OK,
              "Device_Status with 64 extra bytes");
  require(status.tail_intact(), "Device_Status wrote past the fields it knows");
  require(status.args.abi_major == CALRT_ABI_MAJOR,
          "Device_Status with a larger struct: abi_major");
  Padded<Calrt_Calbin_GetInfo_Args> info;
  info.args.calbin = f.calbin.get();
  expect_code(CONF_CALL(ctx, Calbin_GetInfo, info.args), CALRT_OK,
              "Calbin_GetInfo with 64 extra bytes");
  require(info.tail_intact(), "Calbin_GetInfo wrote past the fields it knows");
  require(info.args.model_count == f.info.model_count, "Calbin_GetInfo with a larger struct");

  calrt::Job job = ctx.submit(f, f.prefill);
  job.wait(kClauseWait);
  auto old = args_of<Calrt_Job_Status_Args>();
  old.struct_size = offsetof(Calrt_Job_Status_Args, end_time_ns) + sizeof(old.end_time_ns);
  old.job = job.get();
  old.h2d_end_time_ns = 0x5A5A5A5A;
  old.compute_start_time_ns = 0x5A5A5A5A;
  old.compute_end_time_ns = 0x5A5A5A5A;
  expect_code(CONF_CALL(ctx, Job_Status, old), CALRT_OK,
              "Job_Status with the struct ending at end_time_ns");
  require(old.state == CALRT_JOB_COMPLETED, "Job_Status (old size): job not COMPLETED");
  require(old.h2d_end_time_ns == 0x5A5A5A5A && old.compute_start_time_ns == 0x5A5A5A5A &&
              old.compute_end_time_ns == 0x5A5A5A5A,
          "Job_Status wrote the appended profiling fields past the caller's struct_size");
}

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

void expect_class(const Outcome& outcome, CalrtCode code, CalrtFaultClass fault,
                  const std::string& what) {
  expect_code(outcome, code, what);
  require(CALRT_CODE_FAULT_CLASS(outcome.code) == fault,
          fmt::format(
              "{}: code {} has fault class {}, expected {}", what, calrt::code_name(outcome.code),
              static_cast<int>(CALRT_CODE_FAULT_CLASS(outcome.code)), static_cast<int>(fault)));
}

void err_request_model(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::calbin);
  auto status = args_of<Calrt_Device_Status_Args>();
  expect_class(CONF_CALL(ctx, Device_Status, status), CALRT_INVALID_HANDLE, CALRT_FAULT_REQUEST,
               "Device_Status(NULL)");
  status.device = f.device.get();
  status.struct_size = 0;
  expect_class(CONF_CALL(ctx, Device_Status, status), CALRT_STRUCT_TOO_SMALL, CALRT_FAULT_REQUEST,
               "Device_Status(struct_size 0)");
  auto model = args_of<Calrt_Calbin_GetModel_Args>();
  model.calbin = f.calbin.get();
  model.model_index = f.info.model_count;
  expect_class(CONF_CALL(ctx, Calbin_GetModel, model), CALRT_OUT_OF_RANGE, CALRT_FAULT_REQUEST,
               "Calbin_GetModel(model_count)");
  auto tensor = args_of<Calrt_Calbin_GetTensor_Args>();
  tensor.calbin = f.calbin.get();
  tensor.model_name = "no-such-model";
  tensor.direction = CALRT_INPUT;
  expect_class(CONF_CALL(ctx, Calbin_GetTensor, tensor), CALRT_NOT_FOUND, CALRT_FAULT_REQUEST,
               "Calbin_GetTensor(unknown model)");
  auto reset = args_of<Calrt_Device_Reset_Args>();
  reset.device = f.device.get();
  set_raw(reset.level, CALRT_RESET_LEVEL_COUNT_);
  expect_class(CONF_CALL(ctx, Device_Reset, reset), CALRT_INVALID_ARGUMENT, CALRT_FAULT_REQUEST,
               "Device_Reset(level CALRT_RESET_LEVEL_COUNT_)");
  auto kv = args_of<Calrt_Kv_Capacity_Args>();
  kv.calbin = f.calbin.get();
  expect_class(CONF_CALL(ctx, Kv_Capacity, kv), CALRT_NOT_CONFIGURED, CALRT_FAULT_MODEL,
               "Kv_Capacity before configure");
  const std::string missing = (ctx.options.calbin / "no-such-calbin").string();
  auto create = args_of<Calrt_Calbin_Create_Args>();
  create.device = f.device.get();
  create.path = missing.c_str();
  create.timeout_ns = kClauseWaitNs;
  expect_class(CONF_CALL(ctx, Calbin_Create, create), CALRT_CALBIN_INVALID, CALRT_FAULT_MODEL,
               "Calbin_Create(missing path)");
}

void err_device_class(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  ctx.set_plan(f.device,
               "seed: 1\nfaults:\n  - kind: dma_h2d\n    during: prefill\n    at_op: 1\n");
  const uint64_t errors_before = f.device.status().error_count;
  calrt::Job job = ctx.submit(f, f.prefill);
  const Outcome waited = ctx.wait_raw(job.get(), kClauseWaitNs);
  const calrt::JobStatus status = job.status();
  require(status.state == calrt::JobState::failed,
          fmt::format("job after a dma_h2d fault is {}, expected FAILED",
                      calrt::to_string(status.state)));
  require(status.code == CALRT_DMA_ERROR && status.fault_class() == calrt::FaultClass::device,
          "job after a dma_h2d fault: code " + calrt::code_name(status.code) +
              ", expected DMA_ERROR (device class)");
  require(waited.ok() || CALRT_CODE_FAULT_CLASS(waited.code) == CALRT_FAULT_DEVICE,
          "Job_Wait of the failed job returned " + calrt::code_name(waited.code) +
              ", not a device-class code");
  const calrt::DeviceStatus device = f.device.status();
  require(device.state == calrt::DeviceState::faulted,
          fmt::format("device after a DMA error is {}, expected FAULTED",
                      calrt::to_string(device.state)));
  require(device.error_count == errors_before + 1,
          fmt::format("error_count {} -> {}, expected +1", errors_before, device.error_count));
  require(device.last_error == CALRT_DMA_ERROR,
          "last_error is " + calrt::code_name(device.last_error) + ", expected DMA_ERROR");
}

void err_messages(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::configured);
  const std::string missing = (ctx.options.calbin.parent_path() / "conformance-missing").string();
  auto create = args_of<Calrt_Calbin_Create_Args>();
  create.device = f.device.get();
  create.path = missing.c_str();
  const Outcome calbin = CONF_CALL(ctx, Calbin_Create, create);
  require(!calbin.ok() && calbin.message.find("conformance-missing") != std::string::npos,
          "Calbin_Create of a missing path: message '" + calbin.message + "' does not name it");
  auto buffer = args_of<Calrt_Buffer_Create_Args>();
  buffer.calbin = f.calbin.get();
  buffer.model_name = "conformance_no_such_model";
  buffer.direction = CALRT_INPUT;
  const Outcome model = CONF_CALL(ctx, Buffer_Create, buffer);
  require(!model.ok() && model.message.find("conformance_no_such_model") != std::string::npos,
          "Buffer_Create of an unknown model: message '" + model.message + "' does not name it");
  auto device = args_of<Calrt_Device_Create_Args>();
  device.kind = CALRT_DEVICE_SIM;
  device.config = "conformance_bogus_key=17";
  const Outcome option = CONF_CALL(ctx, Device_Create, device);
  if (device.device != nullptr) {
    auto destroy = args_of<Calrt_Device_Destroy_Args>();
    destroy.device = device.device;
    (void)CONF_CALL(ctx, Device_Destroy, destroy);
  }
  require(!option.ok() && option.message.find("conformance_bogus_key") != std::string::npos,
          "Device_Create with an unknown option: message '" + option.message +
              "' does not name the key");
}

void err_ownership(ClauseContext& ctx) {
  auto status = args_of<Calrt_Device_Status_Args>();
  CalrtError* error = CALRT_HPP_ENTRY(ctx.api, Device_Status)(&status);
  require(error != nullptr, "Device_Status(NULL) returned no error");
  for (int round = 0; round < 2; ++round) {
    auto message = args_of<Calrt_Error_Message_Args>();
    message.error = error;
    CALRT_HPP_ENTRY(ctx.api, Error_Message)(&message);
    require(message.message != nullptr && message.message_size > 0,
            "Error_Message gave an empty message");
    require(std::strlen(message.message) == message.message_size,
            fmt::format("Error_Message: message_size {} but strlen {}", message.message_size,
                        std::strlen(message.message)));
    auto code = args_of<Calrt_Error_GetCode_Args>();
    code.error = error;
    CALRT_HPP_ENTRY(ctx.api, Error_GetCode)(&code);
    require(code.code == CALRT_INVALID_HANDLE,
            "Error_GetCode: " + calrt::code_name(code.code) + ", expected INVALID_HANDLE");
  }
  auto destroy = args_of<Calrt_Error_Destroy_Args>();
  destroy.error = error;
  CALRT_HPP_ENTRY(ctx.api, Error_Destroy)(&destroy);
  auto none = args_of<Calrt_Error_Destroy_Args>();
  CALRT_HPP_ENTRY(ctx.api, Error_Destroy)(&none);
}

}  // namespace

std::vector<Clause> conformance_clauses_api() {
  return {
      {"VER.1", "VER", "table of the current major", ver_table_major},
      {"VER.2", "VER", "wrong major is refused", ver_wrong_major},
      {"VER.3", "VER", "table struct_size", ver_table_size},
      {"VER.4", "VER", "missing entry is UNIMPLEMENTED", ver_missing_entry},
      {"VER.5", "VER", "smaller args struct_size", ver_smaller_struct},
      {"VER.6", "VER", "larger args struct_size", ver_larger_struct},
      {"HDL.1", "HDL", "NULL handles", hdl_null},
      {"HDL.2", "HDL", "never-issued handles", hdl_never_issued},
      {"HDL.3", "HDL", "released handles and double free", hdl_released},
      {"HDL.4", "HDL", "device destroy invalidates children", hdl_device_children},
      {"ERR.1", "ERR", "request and model codes", err_request_model},
      {"ERR.2", "ERR", "device faults are device class", err_device_class},
      {"ERR.3", "ERR", "messages name the object", err_messages},
      {"ERR.4", "ERR", "errors are owned by the caller", err_ownership},
  };
}

}  // namespace runner
