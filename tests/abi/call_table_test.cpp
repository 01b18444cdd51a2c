// The call table (abi/call_table.hpp) against calrt.h: every args struct's size macro is the
// end of the table's last field of that struct, and the table names every call of CalrtApi
// and of the extension structs, in their order. (That the table lists every field of a
// struct, each with a kind its C type has, call_table.hpp asserts itself.)
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "abi/call_table.hpp"

namespace {

using calrt::calls::CallInfo;

#define CHECK_SIZE(Args, SIZE)                         \
  static_assert(CallInfo<Args>::struct_size == (SIZE), \
                "the call table and " #SIZE " disagree on the end of " #Args);
CHECK_SIZE(Calrt_Error_Destroy_Args, CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Error_Message_Args, CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Error_GetCode_Args, CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Device_Create_Args, CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Device_Destroy_Args, CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Device_Status_Args, CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Device_ChipStatus_Args, CALRT_DEVICE_CHIPSTATUS_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Device_Reset_Args, CALRT_DEVICE_RESET_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Device_SetParallelMode_Args, CALRT_DEVICE_SETPARALLELMODE_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Calbin_Create_Args, CALRT_CALBIN_CREATE_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Calbin_Destroy_Args, CALRT_CALBIN_DESTROY_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Calbin_GetInfo_Args, CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Calbin_GetModel_Args, CALRT_CALBIN_GETMODEL_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Calbin_GetTensor_Args, CALRT_CALBIN_GETTENSOR_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Calbin_GetCsr_Args, CALRT_CALBIN_GETCSR_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Calbin_Configure_Args, CALRT_CALBIN_CONFIGURE_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Buffer_Create_Args, CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Buffer_Destroy_Args, CALRT_BUFFER_DESTROY_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Buffer_Map_Args, CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Buffer_Unmap_Args, CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Buffer_SetCsr_Args, CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Buffer_GetCsr_Args, CALRT_BUFFER_GETCSR_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Job_Submit_Args, CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Job_Wait_Args, CALRT_JOB_WAIT_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Job_Status_Args, CALRT_JOB_STATUS_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Job_Cancel_Args, CALRT_JOB_CANCEL_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Job_Destroy_Args, CALRT_JOB_DESTROY_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Kv_Allocate_Args, CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Kv_Apply_Args, CALRT_KV_APPLY_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Kv_Free_Args, CALRT_KV_FREE_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Kv_Clear_Args, CALRT_KV_CLEAR_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Kv_Info_Args, CALRT_KV_INFO_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Kv_Capacity_Args, CALRT_KV_CAPACITY_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Clock_Get_Args, CALRT_CLOCK_GET_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Clock_HostSpend_Args, CALRT_CLOCK_HOST_SPEND_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Trace_Enable_Args, CALRT_TRACE_ENABLE_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Trace_Read_Args, CALRT_TRACE_READ_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Fault_SetPlan_Args, CALRT_FAULT_SET_PLAN_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Fault_GetHits_Args, CALRT_FAULT_GET_HITS_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Diag_Report_Args, CALRT_DIAG_REPORT_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Diag_StateHash_Args, CALRT_DIAG_STATE_HASH_ARGS_STRUCT_SIZE)
CHECK_SIZE(Calrt_Probe_Read_Args, CALRT_PROBE_READ_ARGS_STRUCT_SIZE)
#undef CHECK_SIZE

// Each call's entry is its table's member of that name, taking that args struct.
#define CHECK_ENTRY(Group, Verb, fn)                                                           \
  static_assert(std::is_same_v<                                                                \
                std::remove_const_t<decltype(CallInfo<Calrt_##Group##_##Verb##_Args>::entry)>, \
                Calrt_##Group##_##Verb * CallInfo<Calrt_##Group##_##Verb##_Args>::Table::*>);
CALRT_ERROR_CALLS(CHECK_ENTRY)
CALRT_CORE_CALLS(CHECK_ENTRY)
CALRT_EXT_CALLS(CHECK_ENTRY)
CALRT_PROBE_CALLS(CHECK_ENTRY)
#undef CHECK_ENTRY

// The offsets of a table's entries, in the order the call table lists them.
#define ENTRY_OFFSET(Group, Verb, fn) \
  offsets.push_back(offsetof(CallInfo<Calrt_##Group##_##Verb##_Args>::Table, Group##_##Verb));

TEST(CallTable, ListsEveryEntryOfCalrtApiInTableOrder) {
  std::vector<size_t> offsets;
  CALRT_ERROR_CALLS(ENTRY_OFFSET)
  CALRT_CORE_CALLS(ENTRY_OFFSET)
  ASSERT_EQ(offsets.size(),
            (CALRT_API_STRUCT_SIZE - offsetof(CalrtApi, Error_Destroy)) / sizeof(void*));
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(offsets[i], offsetof(CalrtApi, Error_Destroy) + i * sizeof(void*)) << "entry " << i;
  }
}

TEST(CallTable, ListsEveryEntryOfEachExtensionInStructOrder) {
  const auto check = [](const std::vector<size_t>& offsets, size_t struct_size) {
    ASSERT_EQ(offsets.size(), (struct_size - sizeof(CalrtExtensionBase)) / sizeof(void*));
    for (size_t i = 0; i < offsets.size(); ++i) {
      EXPECT_EQ(offsets[i], sizeof(CalrtExtensionBase) + i * sizeof(void*)) << "entry " << i;
    }
  };
  std::vector<size_t> offsets;
  CALRT_CLOCK_CALLS(ENTRY_OFFSET)
  check(offsets, CALRT_CLOCK_EXTENSION_STRUCT_SIZE);
  offsets.clear();
  CALRT_TRACE_CALLS(ENTRY_OFFSET)
  check(offsets, CALRT_TRACE_EXTENSION_STRUCT_SIZE);
  offsets.clear();
  CALRT_FAULT_CALLS(ENTRY_OFFSET)
  check(offsets, CALRT_FAULT_EXTENSION_STRUCT_SIZE);
  offsets.clear();
  CALRT_DIAG_CALLS(ENTRY_OFFSET)
  check(offsets, CALRT_DIAG_EXTENSION_STRUCT_SIZE);
  offsets.clear();
  CALRT_PROBE_CALLS(ENTRY_OFFSET)
  check(offsets, CALRT_PROBE_EXTENSION_STRUCT_SIZE);
}
#undef ENTRY_OFFSET

// What a generic walk of the table sees: each field once, with the direction and kind
// calrt.h's comments give it.
TEST(CallTable, WalksTheFieldsOfACallInStructOrder) {
  std::vector<std::string> seen;
  calrt::calls::for_each_field<Calrt_Calbin_GetTensor_Args>([&](const auto& field) {
    using F = std::remove_cvref_t<decltype(field)>;
    seen.push_back(std::string(F::dir == calrt::calls::Dir::in ? "in " : "out ") + field.name);
  });
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "in calbin", "in model_name", "in direction", "in index", "out name",
                      "out role", "out dtype", "out rank", "out dims", "out layout", "out tile_d0",
                      "out size_bytes", "out device_address", "out chip_mask"}));
  EXPECT_STREQ(CallInfo<Calrt_Calbin_GetTensor_Args>::name, "Calbin_GetTensor");
}

TEST(CallTable, FieldsAppendedLaterAreNotCoveredByAnOlderStruct) {
  const auto& fields = CallInfo<Calrt_Kv_Apply_Args>::fields;
  EXPECT_TRUE(std::get<1>(fields).covered_by(CALRT_KV_APPLY_ARGS_STRUCT_SIZE_0_7));
  EXPECT_FALSE(std::get<2>(fields).covered_by(CALRT_KV_APPLY_ARGS_STRUCT_SIZE_0_7));
  EXPECT_TRUE(std::get<2>(fields).covered_by(CALRT_KV_APPLY_ARGS_STRUCT_SIZE));
}

}  // namespace
