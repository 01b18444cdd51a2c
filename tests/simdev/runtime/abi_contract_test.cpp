// The C ABI contract as calrt.h states it, exercised through calrt_sim_get_api.
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/simdev/device/sim_session.hpp"
#include "tests/simdev/device/text_match.hpp"

namespace simdev::test {
namespace {

CalrtDevice* open_device(const char* config = nullptr) {
  auto args = make_args<Calrt_Device_Create_Args>(CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE);
  args.kind = CALRT_DEVICE_SIM;
  args.config = config;
  EXPECT_EQ(take(api().Device_Create(&args)).code, CALRT_OK);
  return args.device;
}

ApiError destroy_device(CalrtDevice* device) {
  auto args = make_args<Calrt_Device_Destroy_Args>(CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE);
  args.device = device;
  return take(api().Device_Destroy(&args));
}

ApiError map(CalrtBuffer* buffer, uint32_t index) {
  auto args = make_args<Calrt_Buffer_Map_Args>(CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE);
  args.buffer = buffer;
  args.tensor_index = index;
  return take(api().Buffer_Map(&args));
}

ApiError unmap(CalrtBuffer* buffer, uint32_t index) {
  auto args = make_args<Calrt_Buffer_Unmap_Args>(CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE);
  args.buffer = buffer;
  args.tensor_index = index;
  return take(api().Buffer_Unmap(&args));
}

ApiError submit(Session& s, bool prefill, CalrtJob** job) {
  auto args = make_args<Calrt_Job_Submit_Args>(CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE);
  args.calbin = s.calbin;
  args.model_name = (prefill ? s.prefill_name : s.decode_name).c_str();
  args.input = prefill ? s.prefill_in : s.decode_in;
  args.output = prefill ? s.prefill_out : s.decode_out;
  const ApiError error = take(api().Job_Submit(&args));
  *job = args.job;
  return error;
}

Calrt_Job_Wait_Args wait(CalrtJob* job, uint64_t timeout_ns, ApiError* error = nullptr) {
  auto args = make_args<Calrt_Job_Wait_Args>(CALRT_JOB_WAIT_ARGS_STRUCT_SIZE);
  args.job = job;
  args.timeout_ns = timeout_ns;
  const ApiError e = take(api().Job_Wait(&args));
  if (error != nullptr) {
    *error = e;
  }
  return args;
}

uint64_t device_time_ns(CalrtDevice* device) {
  auto args = make_args<Calrt_Device_Status_Args>(CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE);
  args.device = device;
  EXPECT_EQ(take(api().Device_Status(&args)).code, CALRT_OK);
  return args.device_time_ns;
}

TEST(AbiContract, TableIsVersioned) {
  EXPECT_EQ(calrt_sim_get_api(CALRT_ABI_MAJOR + 1), nullptr);
  const CalrtApi* table = calrt_sim_get_api(CALRT_ABI_MAJOR);
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->struct_size, CALRT_API_STRUCT_SIZE);
  EXPECT_EQ(table->abi_minor, unsigned{CALRT_ABI_MINOR});
  EXPECT_NE(table->Kv_Capacity, nullptr);
}

TEST(AbiContract, StructSizeSmallerRejectedLargerAccepted) {
  auto small = make_args<Calrt_Device_Create_Args>(CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE - 8);
  small.kind = CALRT_DEVICE_SIM;
  const ApiError error = take(api().Device_Create(&small));
  EXPECT_EQ(error.code, CALRT_STRUCT_TOO_SMALL);
  EXPECT_TRUE(contains(error.message, "Calrt_Device_Create_Args")) << error.message;
  EXPECT_TRUE(contains(error.message, std::to_string(CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE)));
  // A newer caller: the struct is followed by fields this runtime does not know.
  std::vector<unsigned char> storage(sizeof(Calrt_Device_Create_Args) + 64, 0xAB);
  auto* large = reinterpret_cast<Calrt_Device_Create_Args*>(storage.data());
  std::memset(large, 0, sizeof *large);
  large->struct_size = storage.size();
  large->kind = CALRT_DEVICE_SIM;
  SIM_OK(api().Device_Create(large));
  EXPECT_EQ(destroy_device(large->device).code, CALRT_OK);
  EXPECT_EQ(take(api().Device_Status(nullptr)).code, CALRT_INVALID_ARGUMENT);
}

TEST(AbiContract, InvalidAndDoubleFreedHandles) {
  CalrtDevice* device = open_device();
  auto status = make_args<Calrt_Device_Status_Args>(CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE);
  status.device = reinterpret_cast<CalrtDevice*>(uintptr_t{0x1234});
  EXPECT_EQ(take(api().Device_Status(&status)).code, CALRT_INVALID_HANDLE);
  status.device = nullptr;
  EXPECT_EQ(take(api().Device_Status(&status)).code, CALRT_INVALID_HANDLE);
  EXPECT_EQ(destroy_device(device).code, CALRT_OK);
  EXPECT_EQ(destroy_device(device).code, CALRT_INVALID_HANDLE);
  status.device = device;
  EXPECT_EQ(take(api().Device_Status(&status)).code, CALRT_INVALID_HANDLE);

  Session s;
  auto kv_free = make_args<Calrt_Kv_Free_Args>(CALRT_KV_FREE_ARGS_STRUCT_SIZE);
  kv_free.kv = s.kv;
  SIM_OK(api().Kv_Free(&kv_free));
  const ApiError twice = take(api().Kv_Free(&kv_free));
  EXPECT_EQ(twice.code, CALRT_INVALID_HANDLE);
  EXPECT_TRUE(contains(twice.message, "kv handle #")) << twice.message;
  EXPECT_TRUE(contains(twice.message, "freed")) << twice.message;
  // A buffer handle passed where a KV handle belongs is rejected by kind.
  kv_free.kv = reinterpret_cast<CalrtKv*>(s.prefill_in);
  EXPECT_EQ(take(api().Kv_Free(&kv_free)).code, CALRT_INVALID_HANDLE);
  // Submitting with a buffer whose KV was freed: no KV applied any more.
  CalrtJob* job = nullptr;
  EXPECT_EQ(submit(s, true, &job).code, CALRT_WRONG_STATE);
  // Destroyed errors are ignored, not double freed.
  CalrtError* error = api().Kv_Free(&kv_free);
  auto destroy = make_args<Calrt_Error_Destroy_Args>(CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE);
  destroy.error = error;
  api().Error_Destroy(&destroy);
  api().Error_Destroy(&destroy);
}

TEST(AbiContract, ModelNamesMatchExactly) {
  Session s;
  for (const std::string& name :
       {s.decode_name.substr(0, s.decode_name.size() - 1), s.decode_name + "x",
        std::string("qwen3_tiny"), std::string("")}) {
    auto args = make_args<Calrt_Buffer_Create_Args>(CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE);
    args.calbin = s.calbin;
    args.model_name = name.c_str();
    args.direction = CALRT_INPUT;
    const ApiError error = take(api().Buffer_Create(&args));
    EXPECT_EQ(error.code, CALRT_NOT_FOUND) << name;
    EXPECT_TRUE(contains(error.message, "\"" + name + "\" not found")) << error.message;
    EXPECT_TRUE(contains(error.message, s.prefill_name)) << error.message;
    EXPECT_TRUE(contains(error.message, s.decode_name)) << error.message;
  }
}

TEST(AbiContract, BuffersOfAnInFlightJobAreBusy) {
  Session s;
  set_csr(s.decode_in, 0, 1);
  CalrtJob* job = nullptr;
  ASSERT_EQ(submit(s, false, &job).code, CALRT_OK);
  // Sync mode: a second job of the calbin (other buffers, same KV) is refused.
  CalrtJob* second = nullptr;
  const ApiError again = submit(s, true, &second);
  EXPECT_EQ(again.code, CALRT_BUSY) << again.message;
  const ApiError mapped = map(s.decode_out, 0);
  EXPECT_EQ(mapped.code, CALRT_BUSY);
  EXPECT_TRUE(contains(mapped.message, "in-flight job #")) << mapped.message;
  auto csr = make_args<Calrt_Buffer_SetCsr_Args>(CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE);
  csr.buffer = s.decode_in;
  EXPECT_EQ(take(api().Buffer_SetCsr(&csr)).code, CALRT_BUSY);
  auto destroy = make_args<Calrt_Buffer_Destroy_Args>(CALRT_BUFFER_DESTROY_ARGS_STRUCT_SIZE);
  destroy.buffer = s.decode_in;
  EXPECT_EQ(take(api().Buffer_Destroy(&destroy)).code, CALRT_BUSY);
  auto apply = make_args<Calrt_Kv_Apply_Args>(CALRT_KV_APPLY_ARGS_STRUCT_SIZE);
  apply.kv = s.kv;
  apply.input = s.decode_in;
  EXPECT_EQ(take(api().Kv_Apply(&apply)).code, CALRT_BUSY);
  auto kv_free = make_args<Calrt_Kv_Free_Args>(CALRT_KV_FREE_ARGS_STRUCT_SIZE);
  kv_free.kv = s.kv;
  EXPECT_EQ(take(api().Kv_Free(&kv_free)).code, CALRT_BUSY);
  EXPECT_EQ(wait(job, CALRT_TIMEOUT_DEFAULT).state, CALRT_JOB_COMPLETED);
  EXPECT_EQ(map(s.decode_out, 0).code, CALRT_OK);  // released at completion
}

TEST(AbiContract, SubmitWithAMappedTensorIsBusy) {
  Session s;
  set_csr(s.decode_in, 0, 1);
  ASSERT_EQ(map(s.decode_in, 0).code, CALRT_OK);
  CalrtJob* job = nullptr;
  EXPECT_EQ(submit(s, false, &job).code, CALRT_BUSY);
  EXPECT_EQ(map(s.decode_in, 0).code, CALRT_BUSY);  // mapped once at a time
  EXPECT_EQ(unmap(s.decode_in, 0).code, CALRT_OK);
  EXPECT_EQ(unmap(s.decode_in, 0).code, CALRT_WRONG_STATE);
  EXPECT_EQ(map(s.decode_in, 7).code, CALRT_OUT_OF_RANGE);
  EXPECT_EQ(unmap(s.decode_in, 7).code, CALRT_OUT_OF_RANGE);
  EXPECT_EQ(submit(s, false, &job).code, CALRT_OK);
}

TEST(AbiContract, WaitTimeoutAdvancesVirtualTimeAndReturnsNotReady) {
  // A 50 ms submission overhead: the job reaches the device's pipeline 50 ms after submit.
  Session s("submit_overhead_ns=50000000");
  set_csr(s.decode_in, 0, 1);
  CalrtJob* job = nullptr;
  ASSERT_EQ(submit(s, false, &job).code, CALRT_OK);
  const uint64_t before = device_time_ns(s.device);
  auto status = make_args<Calrt_Job_Status_Args>(CALRT_JOB_STATUS_ARGS_STRUCT_SIZE);
  status.job = job;
  SIM_OK(api().Job_Status(&status));
  EXPECT_EQ(status.state, CALRT_JOB_SUBMITTED);  // nothing runs until the host waits
  const auto first = wait(job, 10'000'000);
  EXPECT_EQ(first.result, CALRT_WAIT_NOT_READY);
  EXPECT_EQ(first.state, CALRT_JOB_SUBMITTED);
  EXPECT_EQ(device_time_ns(s.device), before + 10'000'000);
  const auto second = wait(job, CALRT_TIMEOUT_DEFAULT);
  EXPECT_EQ(second.result, CALRT_WAIT_READY);
  EXPECT_EQ(second.state, CALRT_JOB_COMPLETED);
  SIM_OK(api().Job_Status(&status));
  EXPECT_EQ(status.code, CALRT_OK);
  EXPECT_LT(status.end_time_ns, before + 10'000'000 + 50'000'000);
  EXPECT_GE(status.start_time_ns - status.submit_time_ns, 50'000'000u);
  EXPECT_GT(status.end_time_ns, status.start_time_ns);
  EXPECT_EQ(wait(job, 1).result, CALRT_WAIT_READY);  // final stays final
}

TEST(AbiContract, CancelAndDestroyInFlightJobs) {
  Session s;
  set_csr(s.decode_in, 0, 1);
  CalrtJob* job = nullptr;
  ASSERT_EQ(submit(s, false, &job).code, CALRT_OK);
  auto cancel = make_args<Calrt_Job_Cancel_Args>(CALRT_JOB_CANCEL_ARGS_STRUCT_SIZE);
  cancel.job = job;
  SIM_OK(api().Job_Cancel(&cancel));
  SIM_OK(api().Job_Cancel(&cancel));  // no-op on a final job
  const auto waited = wait(job, 1);
  EXPECT_EQ(waited.result, CALRT_WAIT_READY);
  EXPECT_EQ(waited.state, CALRT_JOB_CANCELLED);
  EXPECT_EQ(map(s.decode_out, 0).code, CALRT_OK);  // the buffers were released
  EXPECT_EQ(unmap(s.decode_out, 0).code, CALRT_OK);
  ASSERT_EQ(submit(s, false, &job).code, CALRT_OK);
  auto destroy = make_args<Calrt_Job_Destroy_Args>(CALRT_JOB_DESTROY_ARGS_STRUCT_SIZE);
  destroy.job = job;
  SIM_OK(api().Job_Destroy(&destroy));
  EXPECT_EQ(take(api().Job_Destroy(&destroy)).code, CALRT_INVALID_HANDLE);
  EXPECT_EQ(map(s.decode_in, 0).code, CALRT_OK);
  // Destroying a device with a job in flight is bounded and releases everything.
  EXPECT_EQ(unmap(s.decode_in, 0).code, CALRT_OK);
  ASSERT_EQ(submit(s, false, &job).code, CALRT_OK);
}

TEST(AbiContract, KvExhaustionIsARequestFault) {
  Session s("", 4000);
  auto alloc = make_args<Calrt_Kv_Allocate_Args>(CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE);
  alloc.calbin = s.calbin;
  alloc.capacity_tokens = 1000;
  const ApiError error = take(api().Kv_Allocate(&alloc));
  EXPECT_EQ(error.code, CALRT_KV_EXHAUSTED);
  EXPECT_EQ(CALRT_CODE_FAULT_CLASS(error.code), CALRT_FAULT_REQUEST);
  EXPECT_TRUE(contains(error.message, "608 tokens free")) << error.message;
  EXPECT_TRUE(contains(error.message, "1000")) << error.message;
  alloc.capacity_tokens = 0;
  EXPECT_EQ(take(api().Kv_Allocate(&alloc)).code, CALRT_INVALID_ARGUMENT);
  alloc.capacity_tokens = 5000;
  EXPECT_EQ(take(api().Kv_Allocate(&alloc)).code, CALRT_OUT_OF_RANGE);
  auto capacity = make_args<Calrt_Kv_Capacity_Args>(CALRT_KV_CAPACITY_ARGS_STRUCT_SIZE);
  capacity.calbin = s.calbin;
  SIM_OK(api().Kv_Capacity(&capacity));
  EXPECT_EQ(capacity.total_tokens, 4608u);
  EXPECT_EQ(capacity.free_tokens, 608u);
  EXPECT_EQ(capacity.live_handles, 1u);
  EXPECT_GT(capacity.bytes_per_token_per_chip, 0u);
}

TEST(AbiContract, DeviceConfigErrorsNameKeyAndValue) {
  auto args = make_args<Calrt_Device_Create_Args>(CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE);
  args.kind = CALRT_DEVICE_SIM;
  args.config = "seed=1;warp_speed=9";
  const ApiError error = take(api().Device_Create(&args));
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(error.message, "warp_speed=9")) << error.message;
  args.kind = CALRT_DEVICE_PCIE;
  args.config = nullptr;
  EXPECT_EQ(take(api().Device_Create(&args)).code, CALRT_NOT_FOUND);
}

TEST(AbiContract, StatusReportsVersionsAndState) {
  Session s;
  auto status = make_args<Calrt_Device_Status_Args>(CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE);
  status.device = s.device;
  SIM_OK(api().Device_Status(&status));
  EXPECT_STREQ(status.runtime_version, "0.9.0-sim");
  EXPECT_STREQ(status.device_name, "calculet-sim");
  EXPECT_EQ(status.chip_count, 2u);
  EXPECT_EQ(status.state, CALRT_DEVICE_CONFIGURED);
  EXPECT_GT(s.configure_ns, 0u);
  auto chip = make_args<Calrt_Device_ChipStatus_Args>(CALRT_DEVICE_CHIPSTATUS_ARGS_STRUCT_SIZE);
  chip.device = s.device;
  chip.chip = 1;
  SIM_OK(api().Device_ChipStatus(&chip));
  EXPECT_GT(chip.dram_used_bytes, 0u);
  chip.chip = 2;
  EXPECT_EQ(take(api().Device_ChipStatus(&chip)).code, CALRT_OUT_OF_RANGE);
}

TEST(AbiContract, ResetChipDropsConfiguration) {
  Session s;
  auto reset = make_args<Calrt_Device_Reset_Args>(CALRT_DEVICE_RESET_ARGS_STRUCT_SIZE);
  reset.device = s.device;
  reset.level = CALRT_RESET_CHIP;
  SIM_OK(api().Device_Reset(&reset));
  EXPECT_EQ(reset.state, CALRT_DEVICE_OPEN);
  auto info = make_args<Calrt_Kv_Info_Args>(CALRT_KV_INFO_ARGS_STRUCT_SIZE);
  info.kv = s.kv;
  EXPECT_EQ(take(api().Kv_Info(&info)).code, CALRT_INVALID_HANDLE);
  CalrtJob* job = nullptr;
  EXPECT_EQ(submit(s, false, &job).code, CALRT_NOT_CONFIGURED);
  auto configure = make_args<Calrt_Calbin_Configure_Args>(CALRT_CALBIN_CONFIGURE_ARGS_STRUCT_SIZE);
  configure.calbin = s.calbin;
  SIM_OK(api().Calbin_Configure(&configure));
  EXPECT_EQ(take(api().Calbin_Configure(&configure)).code, CALRT_WRONG_STATE);
}

// A C caller may store any int in an enum field. The runtime must refuse such a value by
// name, and reading it must not be undefined behaviour (this test runs under UBSan in CI).
template <class Enum>
void store_raw(Enum& field, int value) {
  static_assert(sizeof(Enum) == sizeof(int));
  std::memcpy(&field, &value, sizeof value);
}

TEST(AbiContract, EnumFieldsOutsideTheirRangeAreRefusedByValue) {
  Session s;
  auto reset = make_args<Calrt_Device_Reset_Args>(CALRT_DEVICE_RESET_ARGS_STRUCT_SIZE);
  reset.device = s.device;
  store_raw(reset.level, 99);
  ApiError error = take(api().Device_Reset(&reset));
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(error.message, "reset level 99")) << error.message;

  auto create = make_args<Calrt_Buffer_Create_Args>(CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE);
  create.calbin = s.calbin;
  create.model_name = s.decode_name.c_str();
  store_raw(create.direction, 99);
  error = take(api().Buffer_Create(&create));
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(error.message, "direction 99")) << error.message;

  auto device = make_args<Calrt_Device_Create_Args>(CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE);
  store_raw(device.kind, 42);
  error = take(api().Device_Create(&device));
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(error.message, "device kind 42")) << error.message;
}

TEST(AbiContract, ConfigureChecksCapacity) {
  auto create = make_args<Calrt_Device_Create_Args>(CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE);
  create.kind = CALRT_DEVICE_SIM;
  create.config = "dram_mib=1";
  SIM_OK(api().Device_Create(&create));
  const std::string path = tiny_calbin().string();
  auto load = make_args<Calrt_Calbin_Create_Args>(CALRT_CALBIN_CREATE_ARGS_STRUCT_SIZE);
  load.device = create.device;
  load.path = path.c_str();
  SIM_OK(api().Calbin_Create(&load));
  auto configure = make_args<Calrt_Calbin_Configure_Args>(CALRT_CALBIN_CONFIGURE_ARGS_STRUCT_SIZE);
  configure.calbin = load.calbin;
  const ApiError error = take(api().Calbin_Configure(&configure));
  EXPECT_EQ(error.code, CALRT_OUT_OF_DEVICE_MEMORY);
  EXPECT_TRUE(contains(error.message, "chip 0")) << error.message;
  EXPECT_TRUE(contains(error.message, "kv_cache")) << error.message;
  load.path = "/nonexistent/calbin";
  EXPECT_EQ(take(api().Calbin_Create(&load)).code, CALRT_CALBIN_INVALID);
  EXPECT_EQ(destroy_device(create.device).code, CALRT_OK);
}

TEST(AbiContract, ParallelModeAllowsOneJobPerSlot) {
  Session s;
  auto mode =
      make_args<Calrt_Device_SetParallelMode_Args>(CALRT_DEVICE_SETPARALLELMODE_ARGS_STRUCT_SIZE);
  mode.device = s.device;
  mode.enable = 1;
  SIM_OK(api().Device_SetParallelMode(&mode));
  auto create = make_args<Calrt_Buffer_Create_Args>(CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE);
  create.calbin = s.calbin;
  create.model_name = s.decode_name.c_str();
  create.direction = CALRT_INPUT;
  create.slot = 1;
  SIM_OK(api().Buffer_Create(&create));
  CalrtBuffer* pong_in = create.buffer;
  create.direction = CALRT_OUTPUT;
  SIM_OK(api().Buffer_Create(&create));
  CalrtBuffer* pong_out = create.buffer;
  create.slot = 2;
  EXPECT_EQ(take(api().Buffer_Create(&create)).code, CALRT_INVALID_ARGUMENT);
  auto alloc = make_args<Calrt_Kv_Allocate_Args>(CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE);
  alloc.calbin = s.calbin;
  alloc.capacity_tokens = 1;
  const ApiError exhausted = take(api().Kv_Allocate(&alloc));
  EXPECT_EQ(exhausted.code, CALRT_KV_EXHAUSTED);  // the session took the whole reservation
  set_csr(s.decode_in, 0, 1);
  set_csr(pong_in, 0, 1);
  auto apply = make_args<Calrt_Kv_Apply_Args>(CALRT_KV_APPLY_ARGS_STRUCT_SIZE);
  apply.kv = s.kv;
  apply.input = pong_in;
  SIM_OK(api().Kv_Apply(&apply));
  CalrtJob* ping = nullptr;
  ASSERT_EQ(submit(s, false, &ping).code, CALRT_OK);
  auto args = make_args<Calrt_Job_Submit_Args>(CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE);
  args.calbin = s.calbin;
  args.model_name = s.decode_name.c_str();
  args.input = pong_in;
  args.output = pong_out;
  // Same KV handle in both jobs: refused (one job extends a KV at a time).
  EXPECT_EQ(take(api().Job_Submit(&args)).code, CALRT_BUSY);
  EXPECT_EQ(take(api().Device_SetParallelMode(&mode)).code, CALRT_WRONG_STATE);  // in flight
  EXPECT_EQ(wait(ping, CALRT_TIMEOUT_DEFAULT).state, CALRT_JOB_COMPLETED);
}

}  // namespace
}  // namespace simdev::test

namespace simdev::test {
namespace {

// Calls on one device from several threads are serialised; none crashes or deadlocks.
TEST(AbiContract, ConcurrentCallsAreSerialised) {
  Session s;
  std::vector<std::thread> pollers;
  std::atomic<bool> stop{false};
  for (int t = 0; t < 3; ++t) {
    pollers.emplace_back([&] {
      while (!stop.load()) {
        auto status = make_args<Calrt_Device_Status_Args>(CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE);
        status.device = s.device;
        EXPECT_EQ(take(api().Device_Status(&status)).code, CALRT_OK);
        auto info = make_args<Calrt_Kv_Info_Args>(CALRT_KV_INFO_ARGS_STRUCT_SIZE);
        info.kv = s.kv;
        EXPECT_EQ(take(api().Kv_Info(&info)).code, CALRT_OK);
      }
    });
  }
  std::vector<int32_t> prompt(300);
  for (size_t i = 0; i < prompt.size(); ++i) {
    prompt[i] = static_cast<int32_t>(i % s.vocab);
  }
  const StepResult r = s.prefill(prompt);
  stop = true;
  for (auto& poller : pollers) {
    poller.join();
  }
  EXPECT_EQ(r.state, CALRT_JOB_COMPLETED);
}

}  // namespace
}  // namespace simdev::test
