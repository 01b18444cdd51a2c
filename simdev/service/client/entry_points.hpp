// The client's implementations of every calrt.h entry, grouped by area in entries_*.cpp;
// api_table.cpp puts them in the function table.
#pragma once

#include "abi/calrt.h"
#include "abi/calrt_ext.h"

namespace simdev::service::client {

void error_destroy(Calrt_Error_Destroy_Args* args);
void error_message(Calrt_Error_Message_Args* args);
void error_get_code(Calrt_Error_GetCode_Args* args);

CalrtError* device_create(Calrt_Device_Create_Args* args);
CalrtError* device_destroy(Calrt_Device_Destroy_Args* args);
CalrtError* device_status(Calrt_Device_Status_Args* args);
CalrtError* device_chip_status(Calrt_Device_ChipStatus_Args* args);
CalrtError* device_reset(Calrt_Device_Reset_Args* args);
CalrtError* device_set_parallel_mode(Calrt_Device_SetParallelMode_Args* args);

CalrtError* calbin_create(Calrt_Calbin_Create_Args* args);
CalrtError* calbin_destroy(Calrt_Calbin_Destroy_Args* args);
CalrtError* calbin_get_info(Calrt_Calbin_GetInfo_Args* args);
CalrtError* calbin_get_model(Calrt_Calbin_GetModel_Args* args);
CalrtError* calbin_get_tensor(Calrt_Calbin_GetTensor_Args* args);
CalrtError* calbin_get_csr(Calrt_Calbin_GetCsr_Args* args);
CalrtError* calbin_configure(Calrt_Calbin_Configure_Args* args);

CalrtError* buffer_create(Calrt_Buffer_Create_Args* args);
CalrtError* buffer_destroy(Calrt_Buffer_Destroy_Args* args);
CalrtError* buffer_map(Calrt_Buffer_Map_Args* args);
CalrtError* buffer_unmap(Calrt_Buffer_Unmap_Args* args);
CalrtError* buffer_set_csr(Calrt_Buffer_SetCsr_Args* args);
CalrtError* buffer_get_csr(Calrt_Buffer_GetCsr_Args* args);

CalrtError* job_submit(Calrt_Job_Submit_Args* args);
CalrtError* job_wait(Calrt_Job_Wait_Args* args);
CalrtError* job_status(Calrt_Job_Status_Args* args);
CalrtError* job_cancel(Calrt_Job_Cancel_Args* args);
CalrtError* job_destroy(Calrt_Job_Destroy_Args* args);

CalrtError* kv_allocate(Calrt_Kv_Allocate_Args* args);
CalrtError* kv_apply(Calrt_Kv_Apply_Args* args);
CalrtError* kv_free(Calrt_Kv_Free_Args* args);
CalrtError* kv_clear(Calrt_Kv_Clear_Args* args);
CalrtError* kv_info(Calrt_Kv_Info_Args* args);
CalrtError* kv_capacity(Calrt_Kv_Capacity_Args* args);

CalrtError* clock_get(Calrt_Clock_Get_Args* args);
CalrtError* clock_host_spend(Calrt_Clock_HostSpend_Args* args);
CalrtError* trace_enable(Calrt_Trace_Enable_Args* args);
CalrtError* trace_read(Calrt_Trace_Read_Args* args);
CalrtError* fault_set_plan(Calrt_Fault_SetPlan_Args* args);
CalrtError* fault_get_hits(Calrt_Fault_GetHits_Args* args);
CalrtError* diag_report(Calrt_Diag_Report_Args* args);
CalrtError* diag_state_hash(Calrt_Diag_StateHash_Args* args);

}  // namespace simdev::service::client
