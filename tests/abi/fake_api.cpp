#include "tests/abi/fake_api.hpp"

#include <cstring>
#include <set>
#include <string>

namespace fake {
namespace {

State g_state;
std::set<void*> g_live_kv;
char g_buffer_bytes[64];

struct Error {
  CalrtCode code;
  std::string message;
};

CalrtError* make_error(CalrtCode code, std::string message) {
  ++g_state.errors_created;
  return reinterpret_cast<CalrtError*>(new Error{code, std::move(message)});
}

void error_destroy(Calrt_Error_Destroy_Args* a) {
  if (a->error != nullptr) {
    ++g_state.errors_destroyed;
    delete reinterpret_cast<Error*>(a->error);
  }
}
void error_message(Calrt_Error_Message_Args* a) {
  const auto* e = reinterpret_cast<const Error*>(a->error);
  a->message = e->message.c_str();
  a->message_size = e->message.size();
}
void error_get_code(Calrt_Error_GetCode_Args* a) {
  a->code = reinterpret_cast<const Error*>(a->error)->code;
}

CalrtError* device_create(Calrt_Device_Create_Args* a) {
  if (a->config != nullptr && std::strcmp(a->config, "fail") == 0) {
    return make_error(CALRT_INVALID_ARGUMENT, "config key 'fail' is not known");
  }
  ++g_state.devices_created;
  a->device = reinterpret_cast<CalrtDevice*>(new int(1));
  return nullptr;
}
CalrtError* device_destroy(Calrt_Device_Destroy_Args* a) {
  ++g_state.devices_destroyed;
  delete reinterpret_cast<int*>(a->device);
  return nullptr;
}
CalrtError* device_status(Calrt_Device_Status_Args* a) {
  a->state = CALRT_DEVICE_OPEN;
  if (g_state.device_state_override != 0) {
    // A buggy runtime's out-of-range value, stored without the UB of an enum cast.
    std::memcpy(&a->state, &g_state.device_state_override, sizeof(a->state));
  }
  a->runtime_version = "fake 1.0";
  a->abi_major = CALRT_ABI_MAJOR;
  a->chip_count = 2;
  a->device_time_ns = 1234;
  return nullptr;
}
CalrtError* calbin_create(Calrt_Calbin_Create_Args* a) {
  a->calbin = reinterpret_cast<CalrtCalbin*>(new int(2));
  return nullptr;
}
CalrtError* calbin_destroy(Calrt_Calbin_Destroy_Args* a) {
  delete reinterpret_cast<int*>(a->calbin);
  return nullptr;
}
CalrtError* buffer_create(Calrt_Buffer_Create_Args* a) {
  a->buffer = reinterpret_cast<CalrtBuffer*>(new int(3));
  return nullptr;
}
CalrtError* buffer_destroy(Calrt_Buffer_Destroy_Args* a) {
  delete reinterpret_cast<int*>(a->buffer);
  return nullptr;
}
CalrtError* buffer_map(Calrt_Buffer_Map_Args* a) {
  a->data = g_buffer_bytes;
  a->size_bytes = sizeof(g_buffer_bytes);
  return nullptr;
}
CalrtError* buffer_unmap(Calrt_Buffer_Unmap_Args*) {
  ++g_state.unmaps;
  return nullptr;
}
CalrtError* job_submit(Calrt_Job_Submit_Args* a) {
  a->job = reinterpret_cast<CalrtJob*>(new int(4));
  return nullptr;
}
CalrtError* job_destroy(Calrt_Job_Destroy_Args* a) {
  delete reinterpret_cast<int*>(a->job);
  return nullptr;
}
CalrtError* job_wait(Calrt_Job_Wait_Args* a) {
  g_state.last_wait_timeout_ns = a->timeout_ns;
  a->result = g_state.job_hung ? CALRT_WAIT_NOT_READY : CALRT_WAIT_READY;
  a->state = g_state.job_hung    ? CALRT_JOB_RUNNING
             : g_state.job_fails ? CALRT_JOB_FAILED
                                 : CALRT_JOB_COMPLETED;
  return nullptr;
}
CalrtError* job_status(Calrt_Job_Status_Args* a) {
  a->state = g_state.job_hung    ? CALRT_JOB_RUNNING
             : g_state.job_fails ? CALRT_JOB_FAILED
                                 : CALRT_JOB_COMPLETED;
  a->code = g_state.job_fails ? CALRT_DMA_ERROR : CALRT_OK;
  a->message = g_state.job_fails ? "DMA error on chip 1" : "";
  a->submit_time_ns = 10;
  a->start_time_ns = 20;
  a->end_time_ns = g_state.job_hung ? 0 : 30;
  return nullptr;
}
CalrtError* kv_allocate(Calrt_Kv_Allocate_Args* a) {
  if (g_state.live_kv >= 2) {
    return make_error(CALRT_KV_EXHAUSTED, "no room: 0 tokens free");
  }
  ++g_state.live_kv;
  a->kv = reinterpret_cast<CalrtKv*>(new int(5));
  g_live_kv.insert(a->kv);
  return nullptr;
}
CalrtError* kv_free(Calrt_Kv_Free_Args* a) {
  if (g_live_kv.erase(a->kv) == 0) {
    return make_error(CALRT_INVALID_HANDLE, "KV handle was released or never issued");
  }
  --g_state.live_kv;
  delete reinterpret_cast<int*>(a->kv);
  return nullptr;
}
CalrtError* kv_capacity(Calrt_Kv_Capacity_Args* a) {
  ++g_state.kv_capacity_calls;
  a->total_tokens = 100;
  return nullptr;
}

}  // namespace

State& state() { return g_state; }

CalrtApi make_table() {
  g_state = State{};
  CalrtApi t{};
  t.struct_size = CALRT_API_STRUCT_SIZE;
  t.abi_major = CALRT_ABI_MAJOR;
  t.abi_minor = CALRT_ABI_MINOR;
  t.Error_Destroy = error_destroy;
  t.Error_Message = error_message;
  t.Error_GetCode = error_get_code;
  t.Device_Create = device_create;
  t.Device_Destroy = device_destroy;
  t.Device_Status = device_status;
  t.Calbin_Create = calbin_create;
  t.Calbin_Destroy = calbin_destroy;
  t.Buffer_Create = buffer_create;
  t.Buffer_Destroy = buffer_destroy;
  t.Buffer_Map = buffer_map;
  t.Buffer_Unmap = buffer_unmap;
  t.Job_Submit = job_submit;
  t.Job_Destroy = job_destroy;
  t.Job_Wait = job_wait;
  t.Job_Status = job_status;
  t.Kv_Allocate = kv_allocate;
  t.Kv_Free = kv_free;
  t.Kv_Capacity = kv_capacity;
  return t;
}

}  // namespace fake
