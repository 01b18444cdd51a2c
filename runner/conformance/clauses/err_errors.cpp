// ERR: errors and fault classes. abi/CONFORMANCE.md#err-errors-and-fault-classes
#include <fmt/format.h>
#include <malloc.h>

#include <cstring>
#include <filesystem>

#include "runner/conformance/clauses/clauses.hpp"

// AddressSanitizer's count of live heap bytes; a null address without it.
extern "C" size_t __sanitizer_get_current_allocated_bytes() __attribute__((weak));

namespace runner {
namespace {

void expect_class(const CallOutcome& outcome, CalrtCode code, CalrtFaultClass fault,
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
  const CallOutcome waited = ctx.wait_raw(job.get(), kClauseWaitNs);
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
  const CallOutcome calbin = CONF_CALL(ctx, Calbin_Create, create);
  require(!calbin.ok() && calbin.message.find("conformance-missing") != std::string::npos,
          "Calbin_Create of a missing path: message '" + calbin.message + "' does not name it");
  auto buffer = args_of<Calrt_Buffer_Create_Args>();
  buffer.calbin = f.calbin.get();
  buffer.model_name = "conformance_no_such_model";
  buffer.direction = CALRT_INPUT;
  const CallOutcome model = CONF_CALL(ctx, Buffer_Create, buffer);
  require(!model.ok() && model.message.find("conformance_no_such_model") != std::string::npos,
          "Buffer_Create of an unknown model: message '" + model.message + "' does not name it");
  auto device = args_of<Calrt_Device_Create_Args>();
  device.kind = CALRT_DEVICE_SIM;
  device.config = "conformance_bogus_key=17";
  const CallOutcome option = CONF_CALL(ctx, Device_Create, device);
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

// Two errors alive at once, each from a Calbin_Create of its own missing path: each message
// names its own path, and the first message, read again after the second, is unchanged (a
// runtime that formats every message into one shared buffer fails here, not in ERR.4).
void err_distinct_messages(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::device);
  const std::filesystem::path dir = ctx.options.calbin.parent_path();
  const std::string paths[2] = {(dir / "conformance-missing-first").string(),
                                (dir / "conformance-missing-second").string()};
  CalrtError* errors[2] = {nullptr, nullptr};
  for (int i = 0; i < 2; ++i) {
    auto create = args_of<Calrt_Calbin_Create_Args>();
    create.device = f.device.get();
    create.path = paths[i].c_str();
    errors[i] = CALRT_HPP_ENTRY(ctx.api, Calbin_Create)(&create);
  }
  const auto message_of = [&](CalrtError* error) {
    auto message = args_of<Calrt_Error_Message_Args>();
    message.error = error;
    CALRT_HPP_ENTRY(ctx.api, Error_Message)(&message);
    return message.message != nullptr ? std::string(message.message) : std::string();
  };
  const auto release = [&] {
    for (CalrtError* error : errors) {
      auto destroy = args_of<Calrt_Error_Destroy_Args>();
      destroy.error = error;
      CALRT_HPP_ENTRY(ctx.api, Error_Destroy)(&destroy);
    }
  };
  if (errors[0] == nullptr || errors[1] == nullptr) {
    release();
    throw ClauseFailure("Calbin_Create of a missing path returned no error");
  }
  auto first_message = args_of<Calrt_Error_Message_Args>();
  first_message.error = errors[0];
  CALRT_HPP_ENTRY(ctx.api, Error_Message)(&first_message);
  const std::string first = first_message.message != nullptr ? first_message.message : "";
  const std::string second = message_of(errors[1]);
  // The first error's own pointer, read after the second message was formatted.
  const std::string first_again = first_message.message != nullptr ? first_message.message : "";
  const std::string first_reread = message_of(errors[0]);
  release();
  require(first.find("conformance-missing-first") != std::string::npos,
          "the first error's message '" + first + "' does not name its path");
  require(second.find("conformance-missing-second") != std::string::npos,
          "the second error's message '" + second + "' does not name its path");
  require(first_again == first && first_reread == first,
          "the first error's message changed once the second was read: '" + first + "' became '" +
              first_again + "' (its pointer) and '" + first_reread + "' (read again)");
}

// Bytes of heap in use in this process (the clause runs in its own child): the sanitizer's
// count under AddressSanitizer, whose quarantine keeps freed blocks from the C library's
// view, else glibc's.
size_t heap_in_use() {
  if (&__sanitizer_get_current_allocated_bytes != nullptr) {
    return __sanitizer_get_current_allocated_bytes();
  }
  const struct mallinfo2 info = ::mallinfo2();
  return info.uordblks + info.hblkhd;
}

// 100,000 errors created, read and destroyed must leave the heap where it was: a runtime
// whose Error_Destroy forgets a part of the error leaks on every failed call of a long-lived
// service. The bound, 1 MiB (10 bytes per error), is far above the allocator's own drift (0
// bytes on the simulator, in process and through the validation layer) and far below a
// per-error leak (the error-destroy-leaks mutant leaves 15.6 MB, 156 bytes per error).
void err_destroy_frees(ClauseContext& ctx) {
  constexpr int kErrors = 100000;
  constexpr size_t kBound = size_t{1} << 20;
  const auto one_error = [&] {
    auto status = args_of<Calrt_Device_Status_Args>();  // device NULL: INVALID_HANDLE
    CalrtError* error = CALRT_HPP_ENTRY(ctx.api, Device_Status)(&status);
    require(error != nullptr, "Device_Status(NULL) returned no error");
    auto message = args_of<Calrt_Error_Message_Args>();
    message.error = error;
    CALRT_HPP_ENTRY(ctx.api, Error_Message)(&message);
    auto destroy = args_of<Calrt_Error_Destroy_Args>();
    destroy.error = error;
    CALRT_HPP_ENTRY(ctx.api, Error_Destroy)(&destroy);
  };
  for (int i = 0; i < 1000; ++i) one_error();  // the runtime's one-time allocations
  const size_t before = heap_in_use();
  for (int i = 0; i < kErrors; ++i) one_error();
  const size_t after = heap_in_use();
  require(after <= before + kBound,
          fmt::format("{} errors created, read and destroyed left {} more bytes of heap in use "
                      "({} to {}): Error_Destroy does not free what the error holds",
                      kErrors, after - before, before, after));
}

}  // namespace

std::vector<Clause> clauses_err() {
  return {
      {"ERR.1", "ERR", "request and model codes", err_request_model},
      {"ERR.2", "ERR", "device faults are device class", err_device_class},
      {"ERR.3", "ERR", "messages name the object", err_messages},
      {"ERR.4", "ERR", "errors are owned by the caller", err_ownership},
      {"ERR.5", "ERR", "each error keeps its own message", err_distinct_messages},
      {"ERR.6", "ERR", "Error_Destroy frees the error", err_destroy_frees},
  };
}

}  // namespace runner
