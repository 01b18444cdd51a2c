// The forwarding runtime and its mutations. Trampolines are templates over the table entry
// they wrap, so that one misbehaviour (say, "a device-class code becomes a request-class
// one") is written once and applied to every entry it concerns.
#include "tests/runner/conformance/mutant_runtime.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <unistd.h>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "abi/calrt_ext.h"
// Errors a mutation makes up come from the simulator's own make_error, so that the
// simulator's Error_* entries, which every mutant table keeps, read and release them.
#include "simdev/runtime/errors.hpp"
#include "simdev/runtime/sim_api.h"

namespace calrt::mutant {
namespace {

const CalrtApi& sim() {
  static const CalrtApi* const table = calrt_sim_get_api(CALRT_ABI_MAJOR);
  return *table;
}

template <class Args>
Args make_args(size_t struct_size) {
  Args args{};
  args.struct_size = struct_size;
  return args;
}

CalrtCode code_of(const CalrtError* error) {
  if (error == nullptr) {
    return CALRT_OK;
  }
  auto args = make_args<Calrt_Error_GetCode_Args>(CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE);
  args.error = error;
  sim().Error_GetCode(&args);
  return args.code;
}

std::string message_of(const CalrtError* error) {
  auto args = make_args<Calrt_Error_Message_Args>(CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE);
  args.error = error;
  sim().Error_Message(&args);
  return args.message != nullptr ? std::string(args.message, args.message_size) : std::string();
}

void destroy(CalrtError* error) {
  auto args = make_args<Calrt_Error_Destroy_Args>(CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE);
  args.error = error;
  sim().Error_Destroy(&args);
}

// The integer in an enum field the caller filled, read through its bytes: a test hands the
// runtime out-of-range values (level 99), and loading those as the enum type is undefined.
template <class E>
int raw_enum(const E& field) {
  std::underlying_type_t<E> value;
  std::memcpy(&value, &field, sizeof(value));
  return static_cast<int>(value);
}

// Destroys `error` when its code is `code` and answers success instead.
CalrtError* swallow(CalrtError* error, CalrtCode code) {
  if (error != nullptr && code_of(error) == code) {
    destroy(error);
    return nullptr;
  }
  return error;
}

// A fallible entry's type. Trampolines reach the original as (sim().*Field), through the
// simulator's table, so that the table stays the one source of truth for what it is.
template <class Args>
using Entry = CalrtError*(Args*);

// Installs trampoline template `Tmpl` for table entry `Field`.
#define MUTANT_WRAP(table, Field, Tmpl) \
  (table).Field = &Tmpl<Calrt_##Field##_Args, &CalrtApi::Field>

// The entry succeeds where the simulator answers `Code`; its out fields stay as they were.
template <CalrtCode Code, class Args, Entry<Args>* CalrtApi::*Field>
CalrtError* swallowing(Args* args) {
  return swallow((sim().*Field)(args), Code);
}
#define MUTANT_SWALLOW(table, Field, Code) \
  (table).Field = &swallowing<Code, Calrt_##Field##_Args, &CalrtApi::Field>

// The entry's errors come out with the code `Recode` gives them, the message unchanged.
template <CalrtCode (*Recode)(CalrtCode), class Args, Entry<Args>* CalrtApi::*Field>
CalrtError* recoded(Args* args) {
  CalrtError* error = (sim().*Field)(args);
  if (error == nullptr) {
    return nullptr;
  }
  const CalrtCode code = code_of(error);
  const CalrtCode changed = Recode(code);
  if (changed == code) {
    return error;
  }
  std::string message = message_of(error);
  destroy(error);
  return simdev::runtime::make_error(changed, std::move(message));
}
#define MUTANT_RECODE(table, Field, Recode) \
  (table).Field = &recoded<Recode, Calrt_##Field##_Args, &CalrtApi::Field>

// Every entry that returns a CalrtError*, i.e. all but the Error_* accessors.
// Kept out of clang-format, which reflows a list of macro calls differently on each run.
// clang-format off
#define MUTANT_FOR_EACH_FALLIBLE_ENTRY(X)                                                          \
  X(Device_Create) X(Device_Destroy) X(Device_Status) X(Device_ChipStatus) X(Device_Reset)         \
  X(Device_SetParallelMode)                                                                        \
  X(Calbin_Create) X(Calbin_Destroy) X(Calbin_GetInfo) X(Calbin_GetModel) X(Calbin_GetTensor)      \
  X(Calbin_GetCsr) X(Calbin_Configure)                                                             \
  X(Buffer_Create) X(Buffer_Destroy) X(Buffer_Map) X(Buffer_Unmap) X(Buffer_SetCsr)                \
  X(Buffer_GetCsr)                                                                                 \
  X(Job_Submit) X(Job_Wait) X(Job_Status) X(Job_Cancel) X(Job_Destroy)                             \
  X(Kv_Allocate) X(Kv_Apply) X(Kv_Free) X(Kv_Clear) X(Kv_Info) X(Kv_Capacity)
// clang-format on

// ---------------------------------------------------------------------------------------
// substring-model-name: a model name that is part of exactly one real name is taken for it.
// case-insensitive-model-name: a name that differs from exactly one real name only in case.
// ---------------------------------------------------------------------------------------
using NameMatch = bool (*)(const std::string& candidate, const std::string& asked);

bool is_substring_of(const std::string& candidate, const std::string& asked) {
  return candidate != asked && candidate.find(asked) != std::string::npos;
}

bool equals_ignoring_case(const std::string& candidate, const std::string& asked) {
  return candidate != asked && candidate.size() == asked.size() &&
         std::equal(candidate.begin(), candidate.end(), asked.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) ==
                  std::tolower(static_cast<unsigned char>(b));
         });
}

// The one model of `calbin` whose name `match`es `name`; empty when there is none or more
// than one.
std::string loose_model_name(CalrtCalbin* calbin, const char* name, NameMatch match) {
  auto info = make_args<Calrt_Calbin_GetInfo_Args>(CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE);
  info.calbin = calbin;
  if (CalrtError* error = sim().Calbin_GetInfo(&info)) {
    destroy(error);
    return {};
  }
  std::string found;
  int matches = 0;
  for (uint32_t i = 0; i < info.model_count; ++i) {
    auto model = make_args<Calrt_Calbin_GetModel_Args>(CALRT_CALBIN_GETMODEL_ARGS_STRUCT_SIZE);
    model.calbin = calbin;
    model.model_index = i;
    if (CalrtError* error = sim().Calbin_GetModel(&model)) {
      destroy(error);
      continue;
    }
    const std::string candidate = model.name != nullptr ? model.name : "";
    if (match(candidate, name)) {
      found = candidate;
      ++matches;
    }
  }
  return matches == 1 ? found : std::string();
}

template <NameMatch Match>
struct LooseName {
  template <class Args, Entry<Args>* CalrtApi::*Field>
  static CalrtError* call(Args* args) {
    CalrtError* error = (sim().*Field)(args);
    if (code_of(error) != CALRT_NOT_FOUND || args->model_name == nullptr) {
      return error;
    }
    const std::string real = loose_model_name(args->calbin, args->model_name, Match);
    if (real.empty()) {
      return error;
    }
    destroy(error);
    const char* asked = args->model_name;
    args->model_name = real.c_str();
    error = (sim().*Field)(args);
    args->model_name = asked;  // borrowed from the caller: hand it back as it was
    return error;
  }
};
template <class Args, Entry<Args>* CalrtApi::*Field>
CalrtError* substring_model_name(Args* args) {
  return LooseName<&is_substring_of>::call<Args, Field>(args);
}
template <class Args, Entry<Args>* CalrtApi::*Field>
CalrtError* case_folded_model_name(Args* args) {
  return LooseName<&equals_ignoring_case>::call<Args, Field>(args);
}

void apply_substring_model_name(CalrtApi& table) {
  MUTANT_WRAP(table, Buffer_Create, substring_model_name);
  MUTANT_WRAP(table, Job_Submit, substring_model_name);
}

void apply_case_insensitive_model_name(CalrtApi& table) {
  MUTANT_WRAP(table, Calbin_GetTensor, case_folded_model_name);
  MUTANT_WRAP(table, Calbin_GetCsr, case_folded_model_name);
  MUTANT_WRAP(table, Job_Submit, case_folded_model_name);
}

// ---------------------------------------------------------------------------------------
// kv-overflow-success: an allocation that does not fit succeeds with a handle that owns
// nothing; the calls on such a handle pretend to work.
// ---------------------------------------------------------------------------------------
struct DummyKv {
  std::mutex mutex;
  std::map<CalrtKv*, uint32_t> capacity;   // dummy handle -> tokens it claims to hold
  uintptr_t next = 0x7e57'0000'0000'0000;  // never a value the simulator's handles take
};

DummyKv& dummy_kv() {
  static DummyKv state;
  return state;
}

bool is_dummy_kv(CalrtKv* kv, uint32_t* capacity = nullptr) {
  auto& state = dummy_kv();
  std::lock_guard lock(state.mutex);
  const auto it = state.capacity.find(kv);
  if (it == state.capacity.end()) {
    return false;
  }
  if (capacity != nullptr) {
    *capacity = it->second;
  }
  return true;
}

CalrtError* kv_allocate_always(Calrt_Kv_Allocate_Args* args) {
  CalrtError* error = sim().Kv_Allocate(args);
  const CalrtCode code = code_of(error);
  if (code != CALRT_KV_EXHAUSTED && code != CALRT_OUT_OF_RANGE) {
    return error;
  }
  destroy(error);
  auto& state = dummy_kv();
  std::lock_guard lock(state.mutex);
  args->kv = reinterpret_cast<CalrtKv*>(state.next++);
  state.capacity[args->kv] = args->capacity_tokens;
  return nullptr;
}

CalrtError* kv_free_dummy(Calrt_Kv_Free_Args* args) {
  auto& state = dummy_kv();
  {
    std::lock_guard lock(state.mutex);
    if (state.capacity.erase(args->kv) != 0) {
      return nullptr;
    }
  }
  return sim().Kv_Free(args);
}

CalrtError* kv_apply_dummy(Calrt_Kv_Apply_Args* args) {
  return is_dummy_kv(args->kv) ? nullptr : sim().Kv_Apply(args);
}

CalrtError* kv_clear_dummy(Calrt_Kv_Clear_Args* args) {
  return is_dummy_kv(args->kv) ? nullptr : sim().Kv_Clear(args);
}

CalrtError* kv_info_dummy(Calrt_Kv_Info_Args* args) {
  uint32_t capacity = 0;
  if (!is_dummy_kv(args->kv, &capacity)) {
    return sim().Kv_Info(args);
  }
  args->capacity_tokens = capacity;
  args->filled_tokens = 0;
  return nullptr;
}

void apply_kv_overflow_success(CalrtApi& table) {
  table.Kv_Allocate = &kv_allocate_always;
  table.Kv_Free = &kv_free_dummy;
  table.Kv_Apply = &kv_apply_dummy;
  table.Kv_Clear = &kv_clear_dummy;
  table.Kv_Info = &kv_info_dummy;
}

// ---------------------------------------------------------------------------------------
// ignore-wait-timeout: a finite wait lasts a thousand times longer (on the device clock of
// the simulator, so the test itself stays fast in wall time).
// ---------------------------------------------------------------------------------------
constexpr uint64_t kWaitStretch = 1000;

CalrtError* job_wait_stretched(Calrt_Job_Wait_Args* args) {
  const uint64_t asked = args->timeout_ns;
  if (asked != CALRT_TIMEOUT_DEFAULT && asked != CALRT_TIMEOUT_INFINITE) {
    args->timeout_ns = asked > (CALRT_TIMEOUT_INFINITE - 1) / kWaitStretch
                           ? CALRT_TIMEOUT_INFINITE - 1
                           : asked * kWaitStretch;
  }
  CalrtError* error = sim().Job_Wait(args);
  args->timeout_ns = asked;
  return error;
}

// ---------------------------------------------------------------------------------------
// map-while-in-flight: mapping a tensor of a buffer that an in-flight job owns hands out a
// private shadow copy instead of failing with BUSY.
// ---------------------------------------------------------------------------------------
struct BufferOrigin {
  CalrtCalbin* calbin = nullptr;
  std::string model_name;
  CalrtDirection direction = CALRT_INPUT;
};

struct InFlightState {
  std::mutex mutex;
  std::map<CalrtBuffer*, BufferOrigin> buffers;
  std::map<CalrtJob*, std::pair<CalrtBuffer*, CalrtBuffer*>> jobs;
  std::map<std::pair<CalrtBuffer*, uint32_t>, std::vector<std::byte>> shadows;
};

InFlightState& in_flight() {
  static InFlightState state;
  return state;
}

bool job_is_final(CalrtJob* job) {
  auto status = make_args<Calrt_Job_Status_Args>(CALRT_JOB_STATUS_ARGS_STRUCT_SIZE);
  status.job = job;
  if (CalrtError* error = sim().Job_Status(&status)) {
    destroy(error);
    return true;  // a job the simulator no longer knows owns nothing
  }
  return status.state != CALRT_JOB_SUBMITTED && status.state != CALRT_JOB_RUNNING;
}

CalrtError* buffer_create_recorded(Calrt_Buffer_Create_Args* args) {
  CalrtError* error = sim().Buffer_Create(args);
  if (error == nullptr) {
    auto& state = in_flight();
    std::lock_guard lock(state.mutex);
    state.buffers[args->buffer] = {args->calbin, args->model_name, args->direction};
  }
  return error;
}

CalrtError* buffer_destroy_recorded(Calrt_Buffer_Destroy_Args* args) {
  CalrtError* error = sim().Buffer_Destroy(args);
  if (error == nullptr) {
    auto& state = in_flight();
    std::lock_guard lock(state.mutex);
    state.buffers.erase(args->buffer);
    std::erase_if(state.shadows,
                  [&](const auto& entry) { return entry.first.first == args->buffer; });
  }
  return error;
}

CalrtError* job_submit_recorded(Calrt_Job_Submit_Args* args) {
  CalrtError* error = sim().Job_Submit(args);
  if (error == nullptr) {
    auto& state = in_flight();
    std::lock_guard lock(state.mutex);
    state.jobs[args->job] = {args->input, args->output};
  }
  return error;
}

CalrtError* job_destroy_recorded(Calrt_Job_Destroy_Args* args) {
  CalrtError* error = sim().Job_Destroy(args);
  if (error == nullptr) {
    auto& state = in_flight();
    std::lock_guard lock(state.mutex);
    state.jobs.erase(args->job);
  }
  return error;
}

CalrtError* buffer_map_shadow(Calrt_Buffer_Map_Args* args) {
  CalrtError* error = sim().Buffer_Map(args);
  if (code_of(error) != CALRT_BUSY) {
    return error;
  }
  auto& state = in_flight();
  std::lock_guard lock(state.mutex);
  const auto origin = state.buffers.find(args->buffer);
  const bool owned = std::any_of(state.jobs.begin(), state.jobs.end(), [&](const auto& job) {
    return (job.second.first == args->buffer || job.second.second == args->buffer) &&
           !job_is_final(job.first);
  });
  const auto key = std::make_pair(args->buffer, args->tensor_index);
  if (!owned || origin == state.buffers.end() || state.shadows.contains(key)) {
    return error;  // mapped twice, or not our business: the simulator's answer stands
  }
  auto tensor = make_args<Calrt_Calbin_GetTensor_Args>(CALRT_CALBIN_GETTENSOR_ARGS_STRUCT_SIZE);
  tensor.calbin = origin->second.calbin;
  tensor.model_name = origin->second.model_name.c_str();
  tensor.direction = origin->second.direction;
  tensor.index = args->tensor_index;
  if (CalrtError* lookup = sim().Calbin_GetTensor(&tensor)) {
    destroy(lookup);
    return error;
  }
  destroy(error);
  auto& shadow = state.shadows[key];
  shadow.assign(tensor.size_bytes, std::byte{0});
  args->data = shadow.data();
  args->size_bytes = shadow.size();
  return nullptr;
}

CalrtError* buffer_unmap_shadow(Calrt_Buffer_Unmap_Args* args) {
  {
    auto& state = in_flight();
    std::lock_guard lock(state.mutex);
    if (state.shadows.erase({args->buffer, args->tensor_index}) != 0) {
      return nullptr;
    }
  }
  return sim().Buffer_Unmap(args);
}

void apply_map_while_in_flight(CalrtApi& table) {
  table.Buffer_Create = &buffer_create_recorded;
  table.Buffer_Destroy = &buffer_destroy_recorded;
  table.Job_Submit = &job_submit_recorded;
  table.Job_Destroy = &job_destroy_recorded;
  table.Buffer_Map = &buffer_map_shadow;
  table.Buffer_Unmap = &buffer_unmap_shadow;
}

// ---------------------------------------------------------------------------------------
// device-fault-as-request: every device-class code (returned, or reported by Job_Status)
// comes out as INVALID_ARGUMENT, the message unchanged.
// ---------------------------------------------------------------------------------------
CalrtCode device_as_request(CalrtCode code) {
  return CALRT_CODE_FAULT_CLASS(code) == CALRT_FAULT_DEVICE ? CALRT_INVALID_ARGUMENT : code;
}

CalrtError* job_status_device_as_request(Calrt_Job_Status_Args* args) {
  CalrtError* error =
      recoded<&device_as_request, Calrt_Job_Status_Args, &CalrtApi::Job_Status>(args);
  if (error == nullptr && CALRT_CODE_FAULT_CLASS(args->code) == CALRT_FAULT_DEVICE) {
    args->code = CALRT_INVALID_ARGUMENT;
  }
  return error;
}

void apply_device_fault_as_request(CalrtApi& table) {
#define MUTANT_AS_REQUEST(Field) MUTANT_RECODE(table, Field, &device_as_request);
  MUTANT_FOR_EACH_FALLIBLE_ENTRY(MUTANT_AS_REQUEST)
#undef MUTANT_AS_REQUEST
  table.Job_Status = &job_status_device_as_request;
}

// ---------------------------------------------------------------------------------------
// wrong-struct-size: an args struct smaller than this ABI's is accepted (its missing fields
// read as zero) instead of being refused with STRUCT_TOO_SMALL. Only the caller's
// struct_size bytes are written back, so the caller's memory is safe.
// ---------------------------------------------------------------------------------------
template <class Args, Entry<Args>* CalrtApi::*Field>
CalrtError* accept_small_struct(Args* args) {
  if (args == nullptr || args->struct_size >= sizeof(Args)) {
    return (sim().*Field)(args);
  }
  const size_t given = args->struct_size;
  Args full{};
  std::memcpy(&full, args, given);
  full.struct_size = sizeof(Args);
  CalrtError* error = (sim().*Field)(&full);
  std::memcpy(args, &full, given);
  args->struct_size = given;
  return error;
}

// small-struct-kv-info: the same, in Kv_Info only (VER.5 used to try four entries).
void apply_small_struct_kv_info(CalrtApi& table) {
  MUTANT_WRAP(table, Kv_Info, accept_small_struct);
}

void apply_wrong_struct_size(CalrtApi& table) {
#define MUTANT_ACCEPT_SMALL(Field) MUTANT_WRAP(table, Field, accept_small_struct);
  MUTANT_FOR_EACH_FALLIBLE_ENTRY(MUTANT_ACCEPT_SMALL)
#undef MUTANT_ACCEPT_SMALL
}

// ---------------------------------------------------------------------------------------
// Smaller mutations, one entry or two each.
// ---------------------------------------------------------------------------------------

// double-free-ok: releasing a handle that was already released succeeds.
void apply_double_free_ok(CalrtApi& table) {
  MUTANT_SWALLOW(table, Device_Destroy, CALRT_INVALID_HANDLE);
  MUTANT_SWALLOW(table, Calbin_Destroy, CALRT_INVALID_HANDLE);
  MUTANT_SWALLOW(table, Buffer_Destroy, CALRT_INVALID_HANDLE);
  MUTANT_SWALLOW(table, Job_Destroy, CALRT_INVALID_HANDLE);
  MUTANT_SWALLOW(table, Kv_Free, CALRT_INVALID_HANDLE);
}

// csr-out-of-range-ok: a CSR index past the model's list is accepted (and reads as 0).
void apply_csr_out_of_range_ok(CalrtApi& table) {
  MUTANT_SWALLOW(table, Buffer_SetCsr, CALRT_OUT_OF_RANGE);
  MUTANT_SWALLOW(table, Buffer_GetCsr, CALRT_OUT_OF_RANGE);
}

// reset-keeps-faulted: a reset of a faulted device reports success (and a healthy state)
// without doing anything, so the device stays FAULTED.
CalrtError* reset_faulted_noop(Calrt_Device_Reset_Args* args) {
  auto status = make_args<Calrt_Device_Status_Args>(CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE);
  status.device = args->device;
  CalrtError* error = sim().Device_Status(&status);
  if (error != nullptr || status.state != CALRT_DEVICE_FAULTED) {
    destroy(error);
    return sim().Device_Reset(args);
  }
  args->state = CALRT_DEVICE_CONFIGURED;
  return nullptr;
}

// cancel-ignored: Job_Cancel reports success and the job runs on.
CalrtError* cancel_ignored(Calrt_Job_Cancel_Args* /*args*/) { return nullptr; }

// parallel-mode-ignored: SetParallelMode reports success and changes nothing.
CalrtError* parallel_mode_ignored(Calrt_Device_SetParallelMode_Args* /*args*/) { return nullptr; }

// configure-twice-ok: configuring an already configured calbin (or on a faulted device)
// succeeds instead of WRONG_STATE.
CalrtError* configure_any_state(Calrt_Calbin_Configure_Args* args) {
  return swallow(sim().Calbin_Configure(args), CALRT_WRONG_STATE);
}

// configure-time-zero / configure-time-inflated: Calbin_Configure reports 0 ns, or a thousand
// times the device time it took.
CalrtError* configure_time_zero(Calrt_Calbin_Configure_Args* args) {
  CalrtError* error = sim().Calbin_Configure(args);
  if (error == nullptr) args->configure_time_ns = 0;
  return error;
}
CalrtError* configure_time_inflated(Calrt_Calbin_Configure_Args* args) {
  CalrtError* error = sim().Calbin_Configure(args);
  if (error == nullptr) args->configure_time_ns *= 1000;
  return error;
}

// error-message-empty: every error comes without a message.
void error_message_empty(Calrt_Error_Message_Args* args) {
  sim().Error_Message(args);
  if (args != nullptr && args->struct_size >= CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE) {
    args->message = "";
    args->message_size = 0;
  }
}

// error-message-shared: every message is formatted into one buffer of the runtime's, so an
// error's message pointer shows whichever message was read last.
void error_message_shared(Calrt_Error_Message_Args* args) {
  static std::string shared;
  sim().Error_Message(args);
  if (args != nullptr && args->struct_size >= CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE &&
      args->message != nullptr) {
    shared.assign(args->message, args->message_size);
    args->message = shared.c_str();
  }
}

// status-wrong-abi: Device_Status claims an ABI major the table does not implement.
CalrtError* status_wrong_abi(Calrt_Device_Status_Args* args) {
  CalrtError* error = sim().Device_Status(args);
  if (error == nullptr) {
    args->abi_major = CALRT_ABI_MAJOR + 1;
  }
  return error;
}

// status-null-firmware: Device_Status leaves firmware_version NULL, which the C++ wrapper
// shows as "" and a C caller dereferences.
CalrtError* status_null_firmware(Calrt_Device_Status_Args* args) {
  CalrtError* error = sim().Device_Status(args);
  if (error == nullptr) {
    args->firmware_version = nullptr;
  }
  return error;
}

// error-destroy-leaks: Error_Destroy frees the first 2000 errors of a process and then no
// more, a leak a short run never notices (the count restarts in each forked child).
void error_destroy_leaks(Calrt_Error_Destroy_Args* args) {
  static pid_t owner = 0;
  static int destroyed = 0;
  if (::getpid() != owner) {
    owner = ::getpid();
    destroyed = 0;
  }
  if (++destroyed <= 2000) {
    sim().Error_Destroy(args);
  }
}

// wait-state-unwritten: Job_Wait leaves its `state` out field as the caller set it.
CalrtError* wait_state_unwritten(Calrt_Job_Wait_Args* args) {
  const CalrtJobState planted = args != nullptr ? args->state : CALRT_JOB_SUBMITTED;
  CalrtError* error = sim().Job_Wait(args);
  if (args != nullptr) {
    args->state = planted;
  }
  return error;
}

// default-timeout-no-wait: CALRT_TIMEOUT_DEFAULT (0) is taken as "do not wait".
CalrtError* wait_default_as_zero(Calrt_Job_Wait_Args* args) {
  if (args == nullptr || args->timeout_ns != CALRT_TIMEOUT_DEFAULT) {
    return sim().Job_Wait(args);
  }
  args->timeout_ns = 1;  // the shortest wait the ABI can express
  CalrtError* error = sim().Job_Wait(args);
  args->timeout_ns = CALRT_TIMEOUT_DEFAULT;
  return error;
}

// The part of a wait's timeout that the two host-cost mutations below act on: up to 1 s, so
// that a clause's 30 s wait that ends NOT_READY costs seconds, not minutes.
std::chrono::nanoseconds host_cost_span(uint64_t timeout_ns) {
  return std::chrono::nanoseconds(std::min<uint64_t>(timeout_ns, 1'000'000'000));
}

bool bounded_wait(const Calrt_Job_Wait_Args* args) {
  return args != nullptr && args->timeout_ns != CALRT_TIMEOUT_DEFAULT &&
         args->timeout_ns != CALRT_TIMEOUT_INFINITE;
}

// wait-oversleeps: a wait that times out answers as the simulator does, after sleeping four
// times its timeout in wall time.
CalrtError* wait_oversleeps(Calrt_Job_Wait_Args* args) {
  CalrtError* error = sim().Job_Wait(args);
  if (error == nullptr && bounded_wait(args) && args->result == CALRT_WAIT_NOT_READY) {
    std::this_thread::sleep_for(4 * host_cost_span(args->timeout_ns));
  }
  return error;
}

// wait-busy-polls: a bounded wait spins until its timeout has passed in wall time, asking the
// simulator with the shortest wait the ABI can express on every turn.
CalrtError* wait_busy_polls(Calrt_Job_Wait_Args* args) {
  if (!bounded_wait(args)) return sim().Job_Wait(args);
  const uint64_t asked = args->timeout_ns;
  const auto deadline = std::chrono::steady_clock::now() + host_cost_span(asked);
  args->timeout_ns = 1;
  CalrtError* error = nullptr;
  do {
    error = sim().Job_Wait(args);
  } while (error == nullptr && args->result == CALRT_WAIT_NOT_READY &&
           std::chrono::steady_clock::now() < deadline);
  args->timeout_ns = asked;
  return error;
}

void apply_none(CalrtApi&) {}
void apply_wait_oversleeps(CalrtApi& table) { table.Job_Wait = &wait_oversleeps; }
void apply_wait_busy_polls(CalrtApi& table) { table.Job_Wait = &wait_busy_polls; }
void apply_default_timeout_no_wait(CalrtApi& table) { table.Job_Wait = &wait_default_as_zero; }
void apply_cancel_invalid_handle_ok(CalrtApi& table) {
  MUTANT_SWALLOW(table, Job_Cancel, CALRT_INVALID_HANDLE);
}
void apply_wait_state_unwritten(CalrtApi& table) { table.Job_Wait = &wait_state_unwritten; }
void apply_ignore_wait_timeout(CalrtApi& table) { table.Job_Wait = &job_wait_stretched; }
void apply_reset_keeps_faulted(CalrtApi& table) { table.Device_Reset = &reset_faulted_noop; }
void apply_cancel_ignored(CalrtApi& table) { table.Job_Cancel = &cancel_ignored; }
void apply_parallel_mode_ignored(CalrtApi& table) {
  table.Device_SetParallelMode = &parallel_mode_ignored;
}
void apply_configure_twice_ok(CalrtApi& table) { table.Calbin_Configure = &configure_any_state; }
void apply_configure_time_zero(CalrtApi& table) { table.Calbin_Configure = &configure_time_zero; }
void apply_configure_time_inflated(CalrtApi& table) {
  table.Calbin_Configure = &configure_time_inflated;
}
void apply_error_message_empty(CalrtApi& table) { table.Error_Message = &error_message_empty; }
void apply_error_message_shared(CalrtApi& table) { table.Error_Message = &error_message_shared; }
void apply_status_wrong_abi(CalrtApi& table) { table.Device_Status = &status_wrong_abi; }
void apply_status_null_firmware(CalrtApi& table) { table.Device_Status = &status_null_firmware; }
void apply_error_destroy_leaks(CalrtApi& table) { table.Error_Destroy = &error_destroy_leaks; }

// ---------------------------------------------------------------------------------------
// Mutations over the host's mappings: the mapping each (buffer, tensor) has, as handed out.
// ---------------------------------------------------------------------------------------
struct Mapping {
  void* data = nullptr;
  uint64_t size_bytes = 0;
};

struct MappingState {
  std::mutex mutex;
  std::map<std::pair<CalrtBuffer*, uint32_t>, Mapping> mapped;
  // Mappings the runtime dropped behind the caller's back; the caller's Unmap still works.
  std::set<std::pair<CalrtBuffer*, uint32_t>> dropped;
};

MappingState& mappings() {
  static MappingState state;
  return state;
}

CalrtError* buffer_map_recorded(Calrt_Buffer_Map_Args* args) {
  CalrtError* error = sim().Buffer_Map(args);
  auto& state = mappings();
  std::lock_guard lock(state.mutex);
  if (error == nullptr) {
    state.mapped[{args->buffer, args->tensor_index}] = {args->data, args->size_bytes};
  }
  return error;
}

// double-map-ok: mapping a mapped tensor hands out the same pointer again.
CalrtError* buffer_map_twice(Calrt_Buffer_Map_Args* args) {
  CalrtError* error = buffer_map_recorded(args);
  if (code_of(error) != CALRT_BUSY) {
    return error;
  }
  auto& state = mappings();
  std::lock_guard lock(state.mutex);
  const auto it = state.mapped.find({args->buffer, args->tensor_index});
  if (it == state.mapped.end()) {
    return error;
  }
  destroy(error);
  args->data = it->second.data;
  args->size_bytes = it->second.size_bytes;
  return nullptr;
}

CalrtError* buffer_unmap_recorded(Calrt_Buffer_Unmap_Args* args) {
  {
    auto& state = mappings();
    std::lock_guard lock(state.mutex);
    state.mapped.erase({args->buffer, args->tensor_index});
    if (state.dropped.erase({args->buffer, args->tensor_index}) != 0) {
      return nullptr;
    }
  }
  return sim().Buffer_Unmap(args);
}

// unmap-discards-writes: what the host wrote through a mapping is lost at unmap.
CalrtError* buffer_unmap_discarding(Calrt_Buffer_Unmap_Args* args) {
  {
    auto& state = mappings();
    std::lock_guard lock(state.mutex);
    if (const auto it = state.mapped.find({args->buffer, args->tensor_index});
        it != state.mapped.end() && it->second.data != nullptr) {
      std::memset(it->second.data, 0, it->second.size_bytes);
    }
  }
  return buffer_unmap_recorded(args);
}

// submit-unmaps: a submission with a mapped tensor unmaps it silently instead of BUSY.
CalrtError* job_submit_unmapping(Calrt_Job_Submit_Args* args) {
  CalrtError* error = sim().Job_Submit(args);
  if (code_of(error) != CALRT_BUSY) {
    return error;
  }
  bool unmapped = false;
  {
    auto& state = mappings();
    std::lock_guard lock(state.mutex);
    for (auto it = state.mapped.begin(); it != state.mapped.end();) {
      if (it->first.first != args->input && it->first.first != args->output) {
        ++it;
        continue;
      }
      auto unmap = make_args<Calrt_Buffer_Unmap_Args>(CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE);
      unmap.buffer = it->first.first;
      unmap.tensor_index = it->first.second;
      destroy(sim().Buffer_Unmap(&unmap));
      state.dropped.insert(it->first);
      it = state.mapped.erase(it);
      unmapped = true;
    }
  }
  if (!unmapped) {
    return error;  // busy for another reason (a job in flight): the answer stands
  }
  destroy(error);
  return sim().Job_Submit(args);
}

// map-size-short: a mapping reports one byte less than the tensor holds.
CalrtError* buffer_map_short(Calrt_Buffer_Map_Args* args) {
  CalrtError* error = sim().Buffer_Map(args);
  if (error == nullptr && args->size_bytes > 0) {
    --args->size_bytes;
  }
  return error;
}

void apply_unmap_discards_writes(CalrtApi& table) {
  table.Buffer_Map = &buffer_map_recorded;
  table.Buffer_Unmap = &buffer_unmap_discarding;
}
void apply_double_map_ok(CalrtApi& table) {
  table.Buffer_Map = &buffer_map_twice;
  table.Buffer_Unmap = &buffer_unmap_recorded;
}
void apply_submit_unmaps(CalrtApi& table) {
  table.Buffer_Map = &buffer_map_recorded;
  table.Buffer_Unmap = &buffer_unmap_recorded;
  table.Job_Submit = &job_submit_unmapping;
}
void apply_map_size_short(CalrtApi& table) { table.Buffer_Map = &buffer_map_short; }
void apply_unmap_unchecked(CalrtApi& table) {
  table.Buffer_Unmap = [](Calrt_Buffer_Unmap_Args* args) -> CalrtError* {
    return swallow(swallow(sim().Buffer_Unmap(args), CALRT_WRONG_STATE), CALRT_OUT_OF_RANGE);
  };
}

// ---------------------------------------------------------------------------------------
// Versions and args structs.
// ---------------------------------------------------------------------------------------

// larger-struct-rejected: a struct_size larger than this ABI's (a newer caller) is refused,
// and so is the first version's Job_Status struct, which the ABI promises to keep accepting.
template <class Args, Entry<Args>* CalrtApi::*Field>
CalrtError* exact_struct_only(Args* args) {
  if (args != nullptr && args->struct_size > sizeof(Args)) {
    return simdev::runtime::make_error(
        CALRT_INVALID_ARGUMENT,
        "struct_size " + std::to_string(args->struct_size) + " is larger than this runtime knows");
  }
  return (sim().*Field)(args);
}

CalrtError* job_status_current_only(Calrt_Job_Status_Args* args) {
  if (args != nullptr && args->struct_size < CALRT_JOB_STATUS_ARGS_STRUCT_SIZE) {
    return simdev::runtime::make_error(CALRT_STRUCT_TOO_SMALL,
                                       "Calrt_Job_Status_Args: struct_size " +
                                           std::to_string(args->struct_size) + " is too small");
  }
  return exact_struct_only<Calrt_Job_Status_Args, &CalrtApi::Job_Status>(args);
}

void apply_larger_struct_rejected(CalrtApi& table) {
#define MUTANT_EXACT(Field) MUTANT_WRAP(table, Field, exact_struct_only);
  MUTANT_FOR_EACH_FALLIBLE_ENTRY(MUTANT_EXACT)
#undef MUTANT_EXACT
  table.Job_Status = &job_status_current_only;
}

// short-table: the table claims this minor version but ends before its last entry.
void apply_short_table(CalrtApi& table) {
  table.struct_size = CALRT_API_STRUCT_SIZE - sizeof(void*);
}

// ---------------------------------------------------------------------------------------
// Handles, codes and calbin information.
// ---------------------------------------------------------------------------------------

// query-invalid-handle-ok: the observing calls answer success for a handle that is NULL,
// forged or released, leaving their out fields untouched.
void apply_query_invalid_handle_ok(CalrtApi& table) {
  MUTANT_SWALLOW(table, Device_Status, CALRT_INVALID_HANDLE);
  MUTANT_SWALLOW(table, Device_ChipStatus, CALRT_INVALID_HANDLE);
  MUTANT_SWALLOW(table, Calbin_GetInfo, CALRT_INVALID_HANDLE);
  MUTANT_SWALLOW(table, Calbin_GetModel, CALRT_INVALID_HANDLE);
  MUTANT_SWALLOW(table, Buffer_GetCsr, CALRT_INVALID_HANDLE);
  MUTANT_SWALLOW(table, Job_Status, CALRT_INVALID_HANDLE);
  MUTANT_SWALLOW(table, Kv_Info, CALRT_INVALID_HANDLE);
  MUTANT_SWALLOW(table, Kv_Capacity, CALRT_INVALID_HANDLE);
}

// model-fault-as-device: model-class codes come out as INTERNAL (device class).
CalrtCode model_as_device(CalrtCode code) {
  return CALRT_CODE_FAULT_CLASS(code) == CALRT_FAULT_MODEL ? CALRT_INTERNAL : code;
}
void apply_model_fault_as_device(CalrtApi& table) {
#define MUTANT_AS_DEVICE(Field) MUTANT_RECODE(table, Field, &model_as_device);
  MUTANT_FOR_EACH_FALLIBLE_ENTRY(MUTANT_AS_DEVICE)
#undef MUTANT_AS_DEVICE
}

// info-wrong-vocab: Calbin_GetInfo reports one more vocabulary entry than the calbin has.
CalrtError* calbin_info_wrong_vocab(Calrt_Calbin_GetInfo_Args* args) {
  CalrtError* error = sim().Calbin_GetInfo(args);
  if (error == nullptr) {
    ++args->vocab;
  }
  return error;
}
void apply_info_wrong_vocab(CalrtApi& table) { table.Calbin_GetInfo = &calbin_info_wrong_vocab; }

void apply_model_index_unchecked(CalrtApi& table) {
  MUTANT_SWALLOW(table, Calbin_GetModel, CALRT_OUT_OF_RANGE);
}
void apply_tensor_index_unchecked(CalrtApi& table) {
  MUTANT_SWALLOW(table, Calbin_GetTensor, CALRT_OUT_OF_RANGE);
  MUTANT_SWALLOW(table, Calbin_GetCsr, CALRT_OUT_OF_RANGE);
}

// configure-no-memory: configure succeeds but reports no memory used on any chip.
CalrtError* configure_no_memory(Calrt_Calbin_Configure_Args* args) {
  CalrtError* error = sim().Calbin_Configure(args);
  if (error == nullptr) {
    std::fill(std::begin(args->memory_used_bytes), std::end(args->memory_used_bytes), 0);
  }
  return error;
}
void apply_configure_no_memory(CalrtApi& table) { table.Calbin_Configure = &configure_no_memory; }

// buffer-args-unchecked: a bad direction or slot is taken for input, slot 0.
CalrtError* buffer_create_unchecked(Calrt_Buffer_Create_Args* args) {
  CalrtError* error = sim().Buffer_Create(args);
  if (code_of(error) != CALRT_INVALID_ARGUMENT) {
    return error;
  }
  destroy(error);
  const uint32_t slot = args->slot;
  const int direction = raw_enum(args->direction);
  if (direction != CALRT_INPUT && direction != CALRT_OUTPUT) {
    args->direction = CALRT_INPUT;
  }
  args->slot = 0;
  error = sim().Buffer_Create(args);
  const auto saved = static_cast<std::underlying_type_t<CalrtDirection>>(direction);
  std::memcpy(&args->direction, &saved, sizeof(args->direction));
  args->slot = slot;
  return error;
}
void apply_buffer_args_unchecked(CalrtApi& table) {
  table.Buffer_Create = &buffer_create_unchecked;
}

// ---------------------------------------------------------------------------------------
// CSRs.
// ---------------------------------------------------------------------------------------

// csr-truncated: CSRs hold 32 bits; the high half of a value is lost.
CalrtError* set_csr_truncated(Calrt_Buffer_SetCsr_Args* args) {
  const uint64_t value = args->value;
  args->value = value & 0xffff'ffffu;
  CalrtError* error = sim().Buffer_SetCsr(args);
  args->value = value;
  return error;
}
void apply_csr_truncated(CalrtApi& table) { table.Buffer_SetCsr = &set_csr_truncated; }

void apply_csr_on_output_ok(CalrtApi& table) {
  MUTANT_SWALLOW(table, Buffer_SetCsr, CALRT_INVALID_ARGUMENT);
  MUTANT_SWALLOW(table, Buffer_GetCsr, CALRT_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------------------------------
// Jobs.
// ---------------------------------------------------------------------------------------

// job-timestamps-unordered: a final job's start lies after its end.
CalrtError* job_status_unordered(Calrt_Job_Status_Args* args) {
  CalrtError* error = sim().Job_Status(args);
  if (error == nullptr && args->end_time_ns > 0) {
    args->start_time_ns = args->end_time_ns + 1;
  }
  return error;
}
void apply_job_timestamps_unordered(CalrtApi& table) { table.Job_Status = &job_status_unordered; }

// submit-errors-as-busy: every refusal of Job_Submit is reported as BUSY.
CalrtCode refusal_as_busy(CalrtCode code) {
  return code == CALRT_NOT_FOUND || code == CALRT_INVALID_ARGUMENT || code == CALRT_WRONG_STATE
             ? CALRT_BUSY
             : code;
}
void apply_submit_errors_as_busy(CalrtApi& table) {
  MUTANT_RECODE(table, Job_Submit, &refusal_as_busy);
}

// busy-as-wrong-state: Job_Submit's BUSY is reported as WRONG_STATE.
CalrtCode busy_as_wrong_state(CalrtCode code) {
  return code == CALRT_BUSY ? CALRT_WRONG_STATE : code;
}
void apply_busy_as_wrong_state(CalrtApi& table) {
  MUTANT_RECODE(table, Job_Submit, &busy_as_wrong_state);
}

// lost-wakeup: once a wait on a job returned NOT_READY, every later wait on it does too.
struct LostWakeups {
  std::mutex mutex;
  std::set<CalrtJob*> jobs;
};
LostWakeups& lost_wakeups() {
  static LostWakeups state;
  return state;
}
CalrtError* job_wait_lost_wakeup(Calrt_Job_Wait_Args* args) {
  auto& state = lost_wakeups();
  {
    std::lock_guard lock(state.mutex);
    if (state.jobs.contains(args->job)) {
      args->result = CALRT_WAIT_NOT_READY;
      args->state = CALRT_JOB_RUNNING;
      return nullptr;
    }
  }
  CalrtError* error = sim().Job_Wait(args);
  if (error == nullptr && args->result == CALRT_WAIT_NOT_READY) {
    std::lock_guard lock(state.mutex);
    state.jobs.insert(args->job);
  }
  return error;
}
CalrtError* job_destroy_forgetting(Calrt_Job_Destroy_Args* args) {
  CalrtError* error = sim().Job_Destroy(args);
  auto& state = lost_wakeups();
  std::lock_guard lock(state.mutex);
  state.jobs.erase(args->job);
  return error;
}
void apply_lost_wakeup(CalrtApi& table) {
  table.Job_Wait = &job_wait_lost_wakeup;
  table.Job_Destroy = &job_destroy_forgetting;
}

// destroy-leaves-job-running: Job_Destroy of a job in flight drops the handle but neither
// cancels the job nor releases its buffers.
CalrtError* job_destroy_leaving(Calrt_Job_Destroy_Args* args) {
  if (args->job != nullptr && !job_is_final(args->job)) {
    return nullptr;
  }
  return sim().Job_Destroy(args);
}
void apply_destroy_leaves_job_running(CalrtApi& table) { table.Job_Destroy = &job_destroy_leaving; }

// buffer-reuse-completes: a job failed for BUFFER_REUSE is reported COMPLETED.
CalrtError* job_status_reuse_completes(Calrt_Job_Status_Args* args) {
  CalrtError* error = sim().Job_Status(args);
  if (error == nullptr && args->state == CALRT_JOB_FAILED && args->code == CALRT_BUFFER_REUSE) {
    args->state = CALRT_JOB_COMPLETED;
    args->code = CALRT_OK;
    args->message = "";
  }
  return error;
}
CalrtError* job_wait_reuse_completes(Calrt_Job_Wait_Args* args) {
  CalrtError* error = sim().Job_Wait(args);
  if (code_of(error) == CALRT_BUFFER_REUSE) {
    destroy(error);
    error = nullptr;
    args->result = CALRT_WAIT_READY;
    args->state = CALRT_JOB_FAILED;
  }
  if (error == nullptr && args->state == CALRT_JOB_FAILED) {
    auto status = make_args<Calrt_Job_Status_Args>(CALRT_JOB_STATUS_ARGS_STRUCT_SIZE);
    status.job = args->job;
    destroy(job_status_reuse_completes(&status));
    args->state = status.state == CALRT_JOB_COMPLETED ? CALRT_JOB_COMPLETED : args->state;
  }
  return error;
}
void apply_buffer_reuse_completes(CalrtApi& table) {
  table.Job_Status = &job_status_reuse_completes;
  table.Job_Wait = &job_wait_reuse_completes;
}

// job-request-fault-as-device: a job that failed for a request-class reason (a bad CSR)
// reports a device-class code.
CalrtCode request_as_device(CalrtCode code) {
  return CALRT_CODE_FAULT_CLASS(code) == CALRT_FAULT_REQUEST ? CALRT_INTERNAL : code;
}
CalrtError* job_status_request_as_device(Calrt_Job_Status_Args* args) {
  CalrtError* error = sim().Job_Status(args);
  if (error == nullptr && args->state == CALRT_JOB_FAILED &&
      CALRT_CODE_FAULT_CLASS(args->code) == CALRT_FAULT_REQUEST) {
    args->code = CALRT_INTERNAL;
  }
  return error;
}
void apply_job_request_fault_as_device(CalrtApi& table) {
  table.Job_Status = &job_status_request_as_device;
  MUTANT_RECODE(table, Job_Wait, &request_as_device);
}

// ---------------------------------------------------------------------------------------
// KV.
// ---------------------------------------------------------------------------------------

// kv-rounds-up: an allocation takes whole prefill chunks (up to the context), so a job that
// writes past the capacity asked for still fits.
CalrtError* kv_allocate_rounded(Calrt_Kv_Allocate_Args* args) {
  auto info = make_args<Calrt_Calbin_GetInfo_Args>(CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE);
  info.calbin = args->calbin;
  CalrtError* error = sim().Calbin_GetInfo(&info);
  const uint32_t asked = args->capacity_tokens;
  if (error != nullptr || info.prefill_chunk == 0 || asked == 0 || asked > info.context) {
    destroy(error);
    return sim().Kv_Allocate(args);
  }
  const uint64_t chunks = (uint64_t{asked} + info.prefill_chunk - 1) / info.prefill_chunk;
  args->capacity_tokens =
      static_cast<uint32_t>(std::min<uint64_t>(chunks * info.prefill_chunk, info.context));
  error = sim().Kv_Allocate(args);
  args->capacity_tokens = asked;
  return error;
}
void apply_kv_rounds_up(CalrtApi& table) { table.Kv_Allocate = &kv_allocate_rounded; }

// kv-capacity-stale: Kv_Capacity reports the reservation as if nothing were allocated.
CalrtError* kv_capacity_stale(Calrt_Kv_Capacity_Args* args) {
  CalrtError* error = sim().Kv_Capacity(args);
  if (error == nullptr) {
    args->free_tokens = args->total_tokens;
    args->largest_free_tokens = args->total_tokens;
    args->live_handles = 0;
  }
  return error;
}
void apply_kv_capacity_stale(CalrtApi& table) { table.Kv_Capacity = &kv_capacity_stale; }

// The index of the CSR called `name` in the model, or nullopt.
std::optional<uint32_t> csr_named(CalrtCalbin* calbin, const char* model, const char* name) {
  for (uint32_t i = 0; i < 16; ++i) {
    auto args = make_args<Calrt_Calbin_GetCsr_Args>(CALRT_CALBIN_GETCSR_ARGS_STRUCT_SIZE);
    args.calbin = calbin;
    args.model_name = model;
    args.index = i;
    if (CalrtError* error = sim().Calbin_GetCsr(&args); error != nullptr) {
      destroy(error);
      return std::nullopt;
    }
    if (args.name != nullptr && std::strcmp(args.name, name) == 0) return i;
  }
  return std::nullopt;
}

uint64_t csr_value(CalrtBuffer* buffer, uint32_t index) {
  auto args = make_args<Calrt_Buffer_GetCsr_Args>(CALRT_BUFFER_GETCSR_ARGS_STRUCT_SIZE);
  args.buffer = buffer;
  args.csr_index = index;
  destroy(sim().Buffer_GetCsr(&args));
  return args.value;
}

void set_csr_value(CalrtBuffer* buffer, uint32_t index, uint64_t value) {
  auto args = make_args<Calrt_Buffer_SetCsr_Args>(CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE);
  args.buffer = buffer;
  args.csr_index = index;
  args.value = value;
  destroy(sim().Buffer_SetCsr(&args));
}

// Submits with one CSR replaced by `change(value)`, then puts the caller's value back: the
// device reads the CSRs at submission, and Buffer_GetCsr still shows what the caller set.
template <class Change>
CalrtError* submit_with_csr(Calrt_Job_Submit_Args* args, const char* name, Change change) {
  const auto index = args->calbin != nullptr && args->model_name != nullptr && args->input
                         ? csr_named(args->calbin, args->model_name, name)
                         : std::nullopt;
  if (!index) return sim().Job_Submit(args);
  const uint64_t asked = csr_value(args->input, *index);
  set_csr_value(args->input, *index, change(args->calbin, asked));
  CalrtError* error = sim().Job_Submit(args);
  set_csr_value(args->input, *index, asked);
  return error;
}

// past-kv-ignored: every chunk is written from KV position 0, whatever
// past_kv_cur_seq_len says.
void apply_past_kv_ignored(CalrtApi& table) {
  table.Job_Submit = [](Calrt_Job_Submit_Args* args) -> CalrtError* {
    return submit_with_csr(args, "past_kv_cur_seq_len",
                           [](CalrtCalbin*, uint64_t) { return uint64_t{0}; });
  };
}

// cur-seq-len-corrected: a cur_seq_len beyond the model's chunk is cut to the chunk.
void apply_cur_seq_len_corrected(CalrtApi& table) {
  table.Job_Submit = [](Calrt_Job_Submit_Args* args) -> CalrtError* {
    return submit_with_csr(args, "cur_seq_len", [](CalrtCalbin* calbin, uint64_t value) {
      auto info = make_args<Calrt_Calbin_GetInfo_Args>(CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE);
      info.calbin = calbin;
      destroy(sim().Calbin_GetInfo(&info));
      return info.prefill_chunk != 0 ? std::min<uint64_t>(value, info.prefill_chunk) : value;
    });
  };
}

// zero-outs-unwritten: out fields whose value is 0 are left as the caller filled them (a
// CSR's value, a KV's fill level, the device's error and reset counts).
void apply_zero_outs_unwritten(CalrtApi& table) {
  table.Buffer_GetCsr = [](Calrt_Buffer_GetCsr_Args* args) -> CalrtError* {
    Calrt_Buffer_GetCsr_Args copy = *args;
    CalrtError* error = sim().Buffer_GetCsr(&copy);
    if (copy.value != 0) args->value = copy.value;
    return error;
  };
  table.Kv_Info = [](Calrt_Kv_Info_Args* args) -> CalrtError* {
    Calrt_Kv_Info_Args copy = *args;
    CalrtError* error = sim().Kv_Info(&copy);
    args->capacity_tokens = copy.capacity_tokens;
    if (copy.filled_tokens != 0) args->filled_tokens = copy.filled_tokens;
    return error;
  };
  table.Device_Status = [](Calrt_Device_Status_Args* args) -> CalrtError* {
    const uint64_t errors = args->error_count;
    const uint64_t resets = args->reset_count;
    CalrtError* error = sim().Device_Status(args);
    if (args->error_count == 0) args->error_count = errors;
    if (args->reset_count == 0) args->reset_count = resets;
    return error;
  };
}

// kv-shrinks: an allocation that does not fit is given whatever single piece is free
// instead of KV_EXHAUSTED.
CalrtError* kv_allocate_shrinking(Calrt_Kv_Allocate_Args* args) {
  CalrtError* error = sim().Kv_Allocate(args);
  if (code_of(error) != CALRT_KV_EXHAUSTED) return error;
  auto capacity = make_args<Calrt_Kv_Capacity_Args>(CALRT_KV_CAPACITY_ARGS_STRUCT_SIZE);
  capacity.calbin = args->calbin;
  CalrtError* query = sim().Kv_Capacity(&capacity);
  if (query != nullptr || capacity.largest_free_tokens == 0) {
    destroy(query);
    return error;
  }
  destroy(error);
  const uint32_t asked = args->capacity_tokens;
  args->capacity_tokens = static_cast<uint32_t>(capacity.largest_free_tokens);
  error = sim().Kv_Allocate(args);
  args->capacity_tokens = asked;
  return error;
}
void apply_kv_shrinks(CalrtApi& table) { table.Kv_Allocate = &kv_allocate_shrinking; }

// kv-free-is-largest: Kv_Capacity reports the largest free piece as the free total.
CalrtError* kv_capacity_largest(Calrt_Kv_Capacity_Args* args) {
  CalrtError* error = sim().Kv_Capacity(args);
  if (error == nullptr) args->free_tokens = args->largest_free_tokens;
  return error;
}
void apply_kv_free_is_largest(CalrtApi& table) { table.Kv_Capacity = &kv_capacity_largest; }

void apply_kv_clear_ignored(CalrtApi& table) {
  table.Kv_Clear = [](Calrt_Kv_Clear_Args*) -> CalrtError* { return nullptr; };
}

void apply_kv_apply_any_row(CalrtApi& table) {
  table.Kv_Apply = [](Calrt_Kv_Apply_Args* args) -> CalrtError* {
    if (args != nullptr && args->struct_size >= CALRT_KV_APPLY_ARGS_STRUCT_SIZE) args->row = 0;
    return sim().Kv_Apply(args);
  };
}

void apply_kv_apply_unchecked(CalrtApi& table) {
  table.Kv_Apply = [](Calrt_Kv_Apply_Args* args) -> CalrtError* {
    return swallow(swallow(sim().Kv_Apply(args), CALRT_INVALID_HANDLE), CALRT_INVALID_ARGUMENT);
  };
}

// ---------------------------------------------------------------------------------------
// Reset.
// ---------------------------------------------------------------------------------------

// The simulator's reset at another level than the one asked for; the caller's field is
// handed back byte for byte.
template <CalrtResetLevel (*Level)(int)>
CalrtError* reset_at(Calrt_Device_Reset_Args* args) {
  const int asked = raw_enum(args->level);
  args->level = Level(asked);
  CalrtError* error = sim().Device_Reset(args);
  const auto saved = static_cast<std::underlying_type_t<CalrtResetLevel>>(asked);
  std::memcpy(&args->level, &saved, sizeof(args->level));
  return error;
}
// reset-escalates: JOB_ABORT resets the chips, dropping the configuration.
CalrtResetLevel escalate(int level) {
  return level == CALRT_RESET_JOB_ABORT ? CALRT_RESET_CHIP : static_cast<CalrtResetLevel>(level);
}
// reset-downgrades: CHIP and FULL only reset the cores, keeping the configuration.
CalrtResetLevel downgrade(int level) {
  return level == CALRT_RESET_CHIP || level == CALRT_RESET_FULL
             ? CALRT_RESET_CORES
             : static_cast<CalrtResetLevel>(level);
}
// reset-level-unchecked: a level outside CalrtResetLevel is taken for FULL.
CalrtResetLevel full_if_unknown(int level) {
  return level < CALRT_RESET_JOB_ABORT || level > CALRT_RESET_FULL
             ? CALRT_RESET_FULL
             : static_cast<CalrtResetLevel>(level);
}
void apply_reset_escalates(CalrtApi& table) { table.Device_Reset = &reset_at<&escalate>; }
void apply_reset_downgrades(CalrtApi& table) { table.Device_Reset = &reset_at<&downgrade>; }
void apply_reset_level_unchecked(CalrtApi& table) {
  table.Device_Reset = &reset_at<&full_if_unknown>;
}

// ---------------------------------------------------------------------------------------
// Threads.
// ---------------------------------------------------------------------------------------

// concurrent-calls-busy: Device_Status is not serialised but refused with BUSY when another
// thread's call is under way (each call lasts long enough for threads to meet).
CalrtError* device_status_unserialised(Calrt_Device_Status_Args* args) {
  static std::mutex in_call;
  std::unique_lock lock(in_call, std::try_to_lock);
  if (!lock.owns_lock()) {
    return simdev::runtime::make_error(CALRT_BUSY, "Device_Status: another call is under way");
  }
  std::this_thread::sleep_for(std::chrono::microseconds(200));
  return sim().Device_Status(args);
}
void apply_concurrent_calls_busy(CalrtApi& table) {
  table.Device_Status = &device_status_unserialised;
}

// ---------------------------------------------------------------------------------------
// The registry.
// ---------------------------------------------------------------------------------------
struct Definition {
  Mutation mutation;
  void (*apply)(CalrtApi& table);
};

constexpr std::array kDefinitions = {
    Definition{{"none", "nothing: forwards every call unchanged"}, &apply_none},
    Definition{{"substring-model-name",
                "exact model names: a name that is part of exactly one model's name is taken "
                "for it (Buffer_Create, Job_Submit)"},
               &apply_substring_model_name},
    Definition{{"case-insensitive-model-name",
                "exact model names: a name that differs from one model's only in case is taken "
                "for it (Calbin_GetTensor, Calbin_GetCsr, Job_Submit)"},
               &apply_case_insensitive_model_name},
    Definition{{"kv-overflow-success",
                "KV_EXHAUSTED and OUT_OF_RANGE of Kv_Allocate: it succeeds with a handle that "
                "owns no KV"},
               &apply_kv_overflow_success},
    Definition{{"ignore-wait-timeout", "Job_Wait's bound: a finite timeout is waited 1000 times"},
               &apply_ignore_wait_timeout},
    Definition{{"map-while-in-flight",
                "BUSY of Buffer_Map on a buffer an in-flight job owns: a shadow copy is "
                "mapped instead"},
               &apply_map_while_in_flight},
    Definition{{"device-fault-as-request",
                "fault classes: device-class codes come out as INVALID_ARGUMENT (returned "
                "errors and Job_Status.code)"},
               &apply_device_fault_as_request},
    Definition{{"wrong-struct-size",
                "STRUCT_TOO_SMALL: an args struct smaller than this ABI's is accepted"},
               &apply_wrong_struct_size},
    Definition{
        {"small-struct-kv-info", "STRUCT_TOO_SMALL of Kv_Info: a smaller args struct is accepted"},
        &apply_small_struct_kv_info},
    Definition{{"any-major", "CalrtGetApi: answers every major version with this table"},
               &apply_none},
    Definition{
        {"status-wrong-abi", "Device_Status's ABI version: it reports a major the table is not"},
        &apply_status_wrong_abi},
    Definition{{"short-table", "the table's struct_size ends before Kv_Capacity"},
               &apply_short_table},
    Definition{{"larger-struct-rejected",
                "newer callers: a struct_size larger than this ABI's, and Job_Status's first "
                "version, are refused"},
               &apply_larger_struct_rejected},
    Definition{{"query-invalid-handle-ok",
                "INVALID_HANDLE of the observing calls: NULL, forged and released handles "
                "answer success"},
               &apply_query_invalid_handle_ok},
    Definition{{"double-free-ok",
                "INVALID_HANDLE of the release calls: Destroy/Free of a released (or NULL, "
                "forged) handle succeeds"},
               &apply_double_free_ok},
    Definition{{"model-fault-as-device",
                "fault classes: model-class codes come out as INTERNAL (device class)"},
               &apply_model_fault_as_device},
    Definition{{"error-message-empty", "error messages: every one is empty"},
               &apply_error_message_empty},
    Definition{{"info-wrong-vocab", "Calbin_GetInfo: reports vocab + 1"}, &apply_info_wrong_vocab},
    Definition{{"model-index-unchecked",
                "OUT_OF_RANGE of Calbin_GetModel: an index past the models succeeds"},
               &apply_model_index_unchecked},
    Definition{{"tensor-index-unchecked",
                "OUT_OF_RANGE of Calbin_GetTensor/GetCsr: an index past the end succeeds"},
               &apply_tensor_index_unchecked},
    Definition{{"configure-no-memory", "Calbin_Configure: reports no memory used on any chip"},
               &apply_configure_no_memory},
    Definition{{"configure-twice-ok",
                "WRONG_STATE of Calbin_Configure (already configured, device faulted): it "
                "succeeds"},
               &apply_configure_twice_ok},
    Definition{{"map-size-short", "Buffer_Map: reports one byte less than the tensor holds"},
               &apply_map_size_short},
    Definition{{"buffer-args-unchecked",
                "INVALID_ARGUMENT of Buffer_Create: a bad direction or slot is taken for "
                "input, slot 0"},
               &apply_buffer_args_unchecked},
    Definition{{"unmap-discards-writes", "Buffer_Unmap: zeroes what the host wrote"},
               &apply_unmap_discards_writes},
    Definition{{"double-map-ok", "BUSY of a second Buffer_Map: the same pointer again"},
               &apply_double_map_ok},
    Definition{{"unmap-unchecked", "WRONG_STATE and OUT_OF_RANGE of Buffer_Unmap: it succeeds"},
               &apply_unmap_unchecked},
    Definition{{"submit-unmaps",
                "BUSY of Job_Submit with a mapped tensor: the tensor is unmapped silently"},
               &apply_submit_unmaps},
    Definition{{"csr-truncated", "Buffer_SetCsr: keeps only the low 32 bits"},
               &apply_csr_truncated},
    Definition{{"csr-out-of-range-ok",
                "OUT_OF_RANGE of Buffer_SetCsr/GetCsr: an index past the CSR list succeeds"},
               &apply_csr_out_of_range_ok},
    Definition{{"csr-on-output-ok",
                "INVALID_ARGUMENT of Buffer_SetCsr/GetCsr on an output buffer: it succeeds"},
               &apply_csr_on_output_ok},
    Definition{{"job-timestamps-unordered", "Job_Status: a final job starts after its end"},
               &apply_job_timestamps_unordered},
    Definition{{"submit-errors-as-busy",
                "Job_Submit's NOT_FOUND, INVALID_ARGUMENT, WRONG_STATE: reported as BUSY"},
               &apply_submit_errors_as_busy},
    Definition{{"busy-as-wrong-state", "Job_Submit's BUSY: reported as WRONG_STATE"},
               &apply_busy_as_wrong_state},
    Definition{{"cancel-ignored", "Job_Cancel: reports success, the job is not cancelled"},
               &apply_cancel_ignored},
    Definition{
        {"lost-wakeup", "Job_Wait: after one NOT_READY, every later wait on the job is NOT_READY"},
        &apply_lost_wakeup},
    Definition{
        {"default-timeout-no-wait", "Job_Wait's CALRT_TIMEOUT_DEFAULT: taken as do-not-wait"},
        &apply_default_timeout_no_wait},
    Definition{{"cancel-invalid-handle-ok",
                "INVALID_HANDLE of Job_Cancel: NULL, forged and released jobs answer success"},
               &apply_cancel_invalid_handle_ok},
    Definition{{"wait-state-unwritten", "Job_Wait's state out field: left as the caller set it"},
               &apply_wait_state_unwritten},
    Definition{{"configure-time-zero", "Calbin_Configure: reports configure_time_ns 0"},
               &apply_configure_time_zero},
    Definition{{"configure-time-inflated",
                "Calbin_Configure: reports a thousand times the device time it took"},
               &apply_configure_time_inflated},
    Definition{{"status-null-firmware", "Device_Status: firmware_version left NULL"},
               &apply_status_null_firmware},
    Definition{{"error-destroy-leaks",
                "Error_Destroy: frees the first 2000 errors of a process, then none"},
               &apply_error_destroy_leaks},
    Definition{{"error-message-shared",
                "Error_Message: every message in one shared buffer, so a message pointer shows "
                "the last message read"},
               &apply_error_message_shared},
    Definition{{"wait-oversleeps",
                "Job_Wait: a wait that times out sleeps four times its timeout in wall time"},
               &apply_wait_oversleeps},
    Definition{{"wait-busy-polls",
                "Job_Wait: a bounded wait spins on 1 ns waits until its timeout has passed"},
               &apply_wait_busy_polls},
    Definition{{"destroy-leaves-job-running",
                "Job_Destroy of a job in flight: the job is neither cancelled nor its buffers "
                "released"},
               &apply_destroy_leaves_job_running},
    Definition{{"parallel-mode-ignored",
                "Device_SetParallelMode: reports success, the mode does not change"},
               &apply_parallel_mode_ignored},
    Definition{
        {"kv-capacity-stale", "Kv_Capacity: reports the reservation as if nothing were allocated"},
        &apply_kv_capacity_stale},
    Definition{{"kv-rounds-up",
                "Kv_Allocate: takes whole prefill chunks, so a job past the capacity asked "
                "for completes"},
               &apply_kv_rounds_up},
    Definition{{"past-kv-ignored",
                "Job_Submit: every chunk goes to KV position 0, whatever past_kv_cur_seq_len "
                "says"},
               &apply_past_kv_ignored},
    Definition{{"cur-seq-len-corrected",
                "Job_Submit: a cur_seq_len beyond the model's chunk is cut to the chunk"},
               &apply_cur_seq_len_corrected},
    Definition{{"zero-outs-unwritten",
                "Buffer_GetCsr, Kv_Info and Device_Status: out fields whose value is 0 are not "
                "written"},
               &apply_zero_outs_unwritten},
    Definition{{"kv-shrinks",
                "Kv_Allocate: an allocation that does not fit gets the largest free piece "
                "instead of KV_EXHAUSTED"},
               &apply_kv_shrinks},
    Definition{
        {"kv-free-is-largest", "Kv_Capacity: reports the largest free piece as the free total"},
        &apply_kv_free_is_largest},
    Definition{{"kv-clear-ignored", "Kv_Clear: reports success, the fill level stays"},
               &apply_kv_clear_ignored},
    Definition{
        {"kv-apply-unchecked", "INVALID_HANDLE and INVALID_ARGUMENT of Kv_Apply: it succeeds"},
        &apply_kv_apply_unchecked},
    Definition{{"kv-apply-any-row", "Kv_Apply: any row binds the handle to row 0"},
               &apply_kv_apply_any_row},
    Definition{{"reset-escalates", "Device_Reset(JOB_ABORT): resets the chips"},
               &apply_reset_escalates},
    Definition{{"reset-downgrades", "Device_Reset(CHIP, FULL): resets only the cores"},
               &apply_reset_downgrades},
    Definition{{"reset-keeps-faulted",
                "Device_Reset of a FAULTED device: reports success, the device stays FAULTED"},
               &apply_reset_keeps_faulted},
    Definition{{"reset-level-unchecked",
                "INVALID_ARGUMENT of Device_Reset: an unknown level is taken for FULL"},
               &apply_reset_level_unchecked},
    Definition{{"concurrent-calls-busy",
                "serialisation: Device_Status is refused with BUSY while another is under way"},
               &apply_concurrent_calls_busy},
    Definition{
        {"buffer-reuse-completes", "BUFFER_REUSE: a job failed for it is reported COMPLETED"},
        &apply_buffer_reuse_completes},
    Definition{{"job-request-fault-as-device",
                "fault classes of failed jobs: a request-class failure reports INTERNAL"},
               &apply_job_request_fault_as_device},
};

std::vector<Mutation> list_mutations() {
  std::vector<Mutation> list;
  for (const auto& definition : kDefinitions) {
    list.push_back(definition.mutation);
  }
  return list;
}

// A table and the copy of the extension chain it points to.
struct MutantTable {
  CalrtApi api{};
  std::vector<std::unique_ptr<std::max_align_t[]>> extensions;
};

// Copies every extension of the simulator's chain, whatever its type, byte for byte, and
// links the copies in the same order.
void copy_extension_chain(MutantTable& table) {
  const auto* source = static_cast<const CalrtExtensionBase*>(sim().extension);
  CalrtExtensionBase* previous = nullptr;
  for (; source != nullptr; source = source->next) {
    const size_t words =
        (source->struct_size + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
    auto storage = std::make_unique<std::max_align_t[]>(words);
    std::memcpy(storage.get(), source, source->struct_size);
    auto* copy = reinterpret_cast<CalrtExtensionBase*>(storage.get());
    copy->next = nullptr;
    if (previous == nullptr) {
      table.api.extension = copy;
    } else {
      previous->next = copy;
    }
    previous = copy;
    table.extensions.push_back(std::move(storage));
  }
}

}  // namespace

std::span<const Mutation> mutations() {
  static const std::vector<Mutation> list = list_mutations();
  return list;
}

const CalrtApi* mutant_api(std::string_view name, uint32_t abi_major) {
  if (abi_major != CALRT_ABI_MAJOR && name != "any-major") {
    return nullptr;
  }
  const auto definition =
      std::find_if(kDefinitions.begin(), kDefinitions.end(),
                   [&](const Definition& d) { return d.mutation.name == name; });
  if (definition == kDefinitions.end()) {
    return nullptr;
  }
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<MutantTable>, std::less<>> tables;
  std::lock_guard lock(mutex);
  if (const auto it = tables.find(name); it != tables.end()) {
    return &it->second->api;
  }
  auto table = std::make_unique<MutantTable>();
  table->api = sim();
  table->api.extension = nullptr;
  copy_extension_chain(*table);
  definition->apply(table->api);
  const CalrtApi* result = &table->api;
  tables.emplace(std::string(name), std::move(table));
  return result;
}

}  // namespace calrt::mutant
