// The device and job state machines: the tables in code against STATE_MACHINE.md, every
// call in every state a device can be driven into (through the C ABI), and no call
// deadlocking while another thread waits (through libcalrt_sim.so, paced clock).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "abi/calrt_ext.hpp"
#include "abi/calrt_loader.hpp"
#include "simdev/device/state_machine.hpp"
#include "simdev/runtime/sim_api.h"
#include "tests/simdev/device/sim_session.hpp"

namespace simdev::test {
namespace {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------
// STATE_MACHINE.md
// ---------------------------------------------------------------------------------------

std::string read_text(const char* path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) {
    return "";
  }
  const size_t end = text.find_last_not_of(" \t");
  return std::string(text.substr(begin, end - begin + 1));
}

// The rows (header first, separator dropped) of the markdown table whose first header cell
// is `first_cell`; empty when there is none.
std::vector<std::vector<std::string>> markdown_table(const std::string& text,
                                                     std::string_view first_cell) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(text);
  std::string line;
  bool inside = false;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '|') {
      if (inside) {
        break;
      }
      continue;
    }
    std::vector<std::string> cells;
    size_t start = 1;
    for (size_t bar = line.find('|', start); bar != std::string::npos;
         bar = line.find('|', start)) {
      cells.push_back(trim(std::string_view(line).substr(start, bar - start)));
      start = bar + 1;
    }
    if (!inside) {
      inside = !cells.empty() && cells[0] == first_cell;
      if (inside) {
        rows.push_back(cells);
      }
      continue;
    }
    if (!cells.empty() && cells[0].starts_with("---")) {
      continue;
    }
    rows.push_back(cells);
  }
  return rows;
}

const std::string& state_machine_md() {
  static const std::string text = read_text(SIMDEV_STATE_MACHINE_MD);
  return text;
}

DeviceCall call_at(size_t index) { return static_cast<DeviceCall>(index); }

const char* verdict_text(CallVerdict verdict) {
  switch (verdict) {
    case CallVerdict::kAllowed:
      return "ok";
    case CallVerdict::kWrongState:
      return "WRONG_STATE";
    case CallVerdict::kDeviceLost:
      return "DEVICE_LOST";
  }
  return "?";
}

// documented[call name][state name]: the call x state table as STATE_MACHINE.md has it.
std::map<std::string, std::map<std::string, std::string>> documented_calls() {
  std::map<std::string, std::map<std::string, std::string>> documented;
  const auto table = markdown_table(state_machine_md(), "call");
  if (table.empty()) {
    return documented;
  }
  for (size_t r = 1; r < table.size(); ++r) {
    for (size_t c = 1; c < table[r].size() && c < table[0].size(); ++c) {
      documented[table[r][0]][table[0][c]] = table[r][c];
    }
  }
  return documented;
}

TEST(StateMachineDoc, CallTableMatchesTheCode) {
  const auto table = markdown_table(state_machine_md(), "call");
  ASSERT_FALSE(table.empty()) << "STATE_MACHINE.md has no table whose header starts with 'call'";
  std::vector<std::string> header = {"call"};
  for (CalrtDeviceState state : kDeviceStates) {
    header.push_back(device_state_name(state));
  }
  EXPECT_EQ(table[0], header);
  ASSERT_EQ(table.size(), kDeviceCallCount + 1) << "one row per DeviceCall";
  for (size_t i = 0; i < kDeviceCallCount; ++i) {
    const std::vector<std::string>& row = table[i + 1];
    ASSERT_EQ(row.size(), header.size()) << "row " << i + 1;
    EXPECT_EQ(row[0], call_name(call_at(i))) << "row " << i + 1 << " out of DeviceCall order";
    for (size_t s = 0; s < kDeviceStates.size(); ++s) {
      EXPECT_EQ(row[s + 1], verdict_text(call_verdict(call_at(i), kDeviceStates[s])))
          << call_name(call_at(i)) << " in " << header[s + 1];
    }
  }
}

TEST(StateMachineDoc, JobTransitionTableMatchesTheCode) {
  const auto table = markdown_table(state_machine_md(), "from \\ to");
  ASSERT_FALSE(table.empty()) << "STATE_MACHINE.md has no table whose header starts with "
                                 "'from \\ to'";
  std::vector<std::string> header = {"from \\ to"};
  for (CalrtJobState state : kJobStates) {
    header.push_back(job_state_name(state));
  }
  EXPECT_EQ(table[0], header);
  ASSERT_EQ(table.size(), kJobStates.size() + 1);
  for (size_t f = 0; f < kJobStates.size(); ++f) {
    const std::vector<std::string>& row = table[f + 1];
    ASSERT_EQ(row.size(), header.size());
    EXPECT_EQ(row[0], job_state_name(kJobStates[f]));
    for (size_t t = 0; t < kJobStates.size(); ++t) {
      EXPECT_EQ(row[t + 1], job_transition_allowed(kJobStates[f], kJobStates[t]) ? "yes" : "-")
          << row[0] << " -> " << header[t + 1];
    }
  }
}

// What calrt.h and calrt_ext.h promise, independently of the table.
TEST(StateMachineTable, KeepsTheAbiHeadersPromises) {
  for (CalrtDeviceState state : kDeviceStates) {
    // "Allowed in every state, including FAULTED and LOST."
    EXPECT_EQ(call_verdict(DeviceCall::kDeviceStatus, state), CallVerdict::kAllowed);
    EXPECT_EQ(call_verdict(DeviceCall::kDeviceChipStatus, state), CallVerdict::kAllowed);
    // Diag_Report: "Allowed in every device state, LOST included."
    EXPECT_EQ(call_verdict(DeviceCall::kDiagReport, state), CallVerdict::kAllowed);
    EXPECT_EQ(call_verdict(DeviceCall::kDiagStateHash, state), CallVerdict::kAllowed);
  }
  std::set<std::string> names;
  for (size_t i = 0; i < kDeviceCallCount; ++i) {
    const std::string name = call_name(call_at(i));
    EXPECT_NE(name, "?");
    EXPECT_TRUE(names.insert(name).second) << "duplicate call name " << name;
    // DEVICE_LOST belongs to LOST only; LOST never says "come back later".
    for (CalrtDeviceState state : kDeviceStates) {
      const CallVerdict verdict = call_verdict(call_at(i), state);
      EXPECT_EQ(verdict == CallVerdict::kDeviceLost,
                state == CALRT_DEVICE_LOST_STATE && verdict != CallVerdict::kAllowed)
          << name << " in " << device_state_name(state);
    }
  }
  // A call or state outside the enumerations is refused, never read out of bounds.
  EXPECT_EQ(call_verdict(call_at(kDeviceCallCount), CALRT_DEVICE_OPEN), CallVerdict::kWrongState);
  EXPECT_EQ(call_verdict(DeviceCall::kDeviceStatus, CALRT_DEVICE_STATE_COUNT_),
            CallVerdict::kWrongState);
  EXPECT_STREQ(call_name(call_at(kDeviceCallCount)), "?");
  EXPECT_STREQ(device_state_name(CALRT_DEVICE_STATE_COUNT_), "?");
}

TEST(StateMachineTable, FinalJobStatesMoveNowhere) {
  for (CalrtJobState from : kJobStates) {
    bool moves = false;
    for (CalrtJobState to : kJobStates) {
      moves |= job_transition_allowed(from, to);
    }
    EXPECT_EQ(moves, !calrt_job_state_final(from)) << job_state_name(from);
  }
  EXPECT_TRUE(calrt_job_state_final(CALRT_JOB_TIMED_OUT));
  EXPECT_FALSE(calrt_job_state_final(CALRT_JOB_RUNNING));
}

TEST(StateMachineTable, AForbiddenJobMoveIsRefusedAndCounted) {
  uint64_t violations = 0;
  CalrtJobState state = CALRT_JOB_SUBMITTED;
  EXPECT_FALSE(move_job_state(state, CALRT_JOB_COMPLETED, violations));  // never started
  EXPECT_EQ(state, CALRT_JOB_SUBMITTED);
  EXPECT_EQ(violations, 1u);
  EXPECT_TRUE(move_job_state(state, CALRT_JOB_RUNNING, violations));
  EXPECT_TRUE(move_job_state(state, CALRT_JOB_TIMED_OUT, violations));
  EXPECT_EQ(state, CALRT_JOB_TIMED_OUT);
  EXPECT_FALSE(move_job_state(state, CALRT_JOB_FAILED, violations));  // final already
  EXPECT_FALSE(move_job_state(state, CALRT_JOB_STATE_COUNT_, violations));
  EXPECT_EQ(state, CALRT_JOB_TIMED_OUT);
  EXPECT_EQ(violations, 3u);
}

// ---------------------------------------------------------------------------------------
// A device in each state, through the C ABI of a given runtime table.
// ---------------------------------------------------------------------------------------

struct Outcome {
  CalrtCode code = CALRT_OK;
  std::string message;
};

// Reads and destroys an error through the table that made it (each runtime, in process or
// loaded, keeps its own errors).
Outcome take_from(const CalrtApi& t, CalrtError* error) {
  if (error == nullptr) {
    return {};
  }
  auto code = calrt::detail::make_args<Calrt_Error_GetCode_Args>();
  code.error = error;
  t.Error_GetCode(&code);
  auto message = calrt::detail::make_args<Calrt_Error_Message_Args>();
  message.error = error;
  t.Error_Message(&message);
  Outcome outcome{code.code, std::string(message.message, message.message_size)};
  auto destroy = calrt::detail::make_args<Calrt_Error_Destroy_Args>();
  destroy.error = error;
  t.Error_Destroy(&destroy);
  return outcome;
}

template <class Ext>
const Ext* extension(const CalrtApi& t, CalrtExtensionType type, size_t size) {
  return reinterpret_cast<const Ext*>(calrt::find_extension(calrt::Api(&t), type, size));
}

constexpr uint32_t kLaneKvTokens = 64;

// One device with: a configured calbin and an unconfigured one; parallel mode on; two
// decode lanes (slot 0 and slot 1, each with its KV handle applied and its CSRs set); a
// spare input buffer, a spare output buffer with tensor 0 mapped, a spare KV handle; and
// the job that the job calls act on.
class World {
 public:
  World(const CalrtApi& table, const std::string& config, bool run_first_job) : t(table) {
    auto create = calrt::detail::make_args<Calrt_Device_Create_Args>();
    create.kind = CALRT_DEVICE_SIM;
    create.config = config.c_str();
    ok("Device_Create", t.Device_Create(&create));
    device = create.device;
    auto mode = calrt::detail::make_args<Calrt_Device_SetParallelMode_Args>();
    mode.device = device;
    mode.enable = 1;
    ok("Device_SetParallelMode", t.Device_SetParallelMode(&mode));
    calbin = load();
    spare_calbin = load();
    auto configure = calrt::detail::make_args<Calrt_Calbin_Configure_Args>();
    configure.calbin = calbin;
    ok("Calbin_Configure", t.Calbin_Configure(&configure));
    find_decode();
    in0 = buffer(CALRT_INPUT, 0);
    out0 = buffer(CALRT_OUTPUT, 0);
    in1 = buffer(CALRT_INPUT, 1);
    out1 = buffer(CALRT_OUTPUT, 1);
    spare_in = buffer(CALRT_INPUT, 0);
    spare_out = buffer(CALRT_OUTPUT, 0);
    kv0 = kv(kLaneKvTokens);
    kv1 = kv(kLaneKvTokens);
    spare_kv = kv(8);
    apply(kv0, in0);
    apply(kv1, in1);
    for (CalrtBuffer* input : {in0, in1}) {
      set_csr(input, 0, 1);  // cur_seq_len: one decode token
      set_csr(input, 1, 0);  // past_kv_cur_seq_len
    }
    auto map = calrt::detail::make_args<Calrt_Buffer_Map_Args>();
    map.buffer = spare_out;
    ok("Buffer_Map", t.Buffer_Map(&map));
    if (run_first_job) {
      job = submit(in0, out0);
      const Outcome waited = wait(job, CALRT_TIMEOUT_DEFAULT);
      EXPECT_EQ(waited.code, CALRT_OK) << waited.message;
    }
  }
  ~World() {
    auto destroy = calrt::detail::make_args<Calrt_Device_Destroy_Args>();
    destroy.device = device;
    take_from(t, t.Device_Destroy(&destroy));
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  void ok(const char* what, CalrtError* error) {
    const Outcome outcome = take_from(t, error);
    EXPECT_EQ(outcome.code, CALRT_OK) << what << ": " << outcome.message;
  }

  CalrtJob* submit(CalrtBuffer* input, CalrtBuffer* output) {
    auto args = calrt::detail::make_args<Calrt_Job_Submit_Args>();
    args.calbin = calbin;
    args.model_name = decode.c_str();
    args.input = input;
    args.output = output;
    ok("Job_Submit", t.Job_Submit(&args));
    return args.job;
  }

  Outcome wait(CalrtJob* which, uint64_t timeout_ns, CalrtJobState* state = nullptr) {
    auto args = calrt::detail::make_args<Calrt_Job_Wait_Args>();
    args.job = which;
    args.timeout_ns = timeout_ns;
    Outcome outcome = take_from(t, t.Job_Wait(&args));
    if (state != nullptr) {
      *state = args.state;
    }
    return outcome;
  }

  void set_plan(const std::string& yaml) {
    const auto* faults =
        extension<CalrtFaultExtension>(t, CALRT_EXT_FAULT, CALRT_FAULT_EXTENSION_STRUCT_SIZE);
    ASSERT_NE(faults, nullptr);
    auto args = calrt::detail::make_args<Calrt_Fault_SetPlan_Args>();
    args.device = device;
    args.plan = yaml.data();
    args.plan_size = yaml.size();
    ok("Fault_SetPlan", faults->Fault_SetPlan(&args));
  }

  CalrtDeviceState state() {
    auto args = calrt::detail::make_args<Calrt_Device_Status_Args>();
    args.device = device;
    ok("Device_Status", t.Device_Status(&args));
    return args.state;
  }

  const CalrtApi& t;
  CalrtDevice* device = nullptr;
  CalrtCalbin* calbin = nullptr;
  CalrtCalbin* spare_calbin = nullptr;
  std::string path = tiny_calbin().string();
  std::string decode;
  CalrtBuffer* in0 = nullptr;
  CalrtBuffer* out0 = nullptr;
  CalrtBuffer* in1 = nullptr;
  CalrtBuffer* out1 = nullptr;
  CalrtBuffer* spare_in = nullptr;
  CalrtBuffer* spare_out = nullptr;
  CalrtKv* kv0 = nullptr;
  CalrtKv* kv1 = nullptr;
  CalrtKv* spare_kv = nullptr;
  CalrtJob* job = nullptr;             // what Job_Wait/Status/Cancel/Destroy act on
  CalrtJob* last_submitted = nullptr;  // what the invoked Job_Submit returned
  uint64_t wait_timeout_ns = CALRT_TIMEOUT_DEFAULT;

 private:
  CalrtCalbin* load() {
    auto args = calrt::detail::make_args<Calrt_Calbin_Create_Args>();
    args.device = device;
    args.path = path.c_str();
    ok("Calbin_Create", t.Calbin_Create(&args));
    return args.calbin;
  }
  void find_decode() {
    auto info = calrt::detail::make_args<Calrt_Calbin_GetInfo_Args>();
    info.calbin = calbin;
    ok("Calbin_GetInfo", t.Calbin_GetInfo(&info));
    for (uint32_t i = 0; i < info.model_count; ++i) {
      auto model = calrt::detail::make_args<Calrt_Calbin_GetModel_Args>();
      model.calbin = calbin;
      model.model_index = i;
      ok("Calbin_GetModel", t.Calbin_GetModel(&model));
      if (model.type == CALRT_MODEL_DECODE) {
        decode = model.name;
      }
    }
    EXPECT_FALSE(decode.empty()) << "the tiny calbin has no decode model";
  }
  CalrtBuffer* buffer(CalrtDirection direction, uint32_t slot) {
    auto args = calrt::detail::make_args<Calrt_Buffer_Create_Args>();
    args.calbin = calbin;
    args.model_name = decode.c_str();
    args.direction = direction;
    args.slot = slot;
    ok("Buffer_Create", t.Buffer_Create(&args));
    return args.buffer;
  }
  CalrtKv* kv(uint32_t tokens) {
    auto args = calrt::detail::make_args<Calrt_Kv_Allocate_Args>();
    args.calbin = calbin;
    args.capacity_tokens = tokens;
    ok("Kv_Allocate", t.Kv_Allocate(&args));
    return args.kv;
  }
  void apply(CalrtKv* handle, CalrtBuffer* input) {
    auto args = calrt::detail::make_args<Calrt_Kv_Apply_Args>();
    args.kv = handle;
    args.input = input;
    ok("Kv_Apply", t.Kv_Apply(&args));
  }
  void set_csr(CalrtBuffer* input, uint32_t index, uint64_t value) {
    auto args = calrt::detail::make_args<Calrt_Buffer_SetCsr_Args>();
    args.buffer = input;
    args.csr_index = index;
    args.value = value;
    ok("Buffer_SetCsr", t.Buffer_SetCsr(&args));
  }
};

// Calls `call` on the world's objects with arguments that succeed when the device's state
// and the objects allow it.
Outcome invoke(World& w, DeviceCall call) {
  const CalrtApi& t = w.t;
  auto take = [&](CalrtError* error) { return take_from(t, error); };
  switch (call) {
    case DeviceCall::kDeviceStatus: {
      auto args = calrt::detail::make_args<Calrt_Device_Status_Args>();
      args.device = w.device;
      return take(t.Device_Status(&args));
    }
    case DeviceCall::kDeviceChipStatus: {
      auto args = calrt::detail::make_args<Calrt_Device_ChipStatus_Args>();
      args.device = w.device;
      args.chip = 0;
      return take(t.Device_ChipStatus(&args));
    }
    case DeviceCall::kDeviceReset: {
      auto args = calrt::detail::make_args<Calrt_Device_Reset_Args>();
      args.device = w.device;
      args.level = CALRT_RESET_FULL;  // clears every fault that is not persistent
      return take(t.Device_Reset(&args));
    }
    case DeviceCall::kDeviceSetParallelMode: {
      auto args = calrt::detail::make_args<Calrt_Device_SetParallelMode_Args>();
      args.device = w.device;
      args.enable = 1;
      return take(t.Device_SetParallelMode(&args));
    }
    case DeviceCall::kCalbinCreate: {
      auto args = calrt::detail::make_args<Calrt_Calbin_Create_Args>();
      args.device = w.device;
      args.path = w.path.c_str();
      return take(t.Calbin_Create(&args));
    }
    case DeviceCall::kCalbinDestroy: {
      auto args = calrt::detail::make_args<Calrt_Calbin_Destroy_Args>();
      args.calbin = w.spare_calbin;
      return take(t.Calbin_Destroy(&args));
    }
    case DeviceCall::kCalbinGetInfo: {
      auto args = calrt::detail::make_args<Calrt_Calbin_GetInfo_Args>();
      args.calbin = w.calbin;
      return take(t.Calbin_GetInfo(&args));
    }
    case DeviceCall::kCalbinGetModel: {
      auto args = calrt::detail::make_args<Calrt_Calbin_GetModel_Args>();
      args.calbin = w.calbin;
      args.model_index = 0;
      return take(t.Calbin_GetModel(&args));
    }
    case DeviceCall::kCalbinGetTensor: {
      auto args = calrt::detail::make_args<Calrt_Calbin_GetTensor_Args>();
      args.calbin = w.calbin;
      args.model_name = w.decode.c_str();
      args.direction = CALRT_INPUT;
      args.index = 0;
      return take(t.Calbin_GetTensor(&args));
    }
    case DeviceCall::kCalbinGetCsr: {
      auto args = calrt::detail::make_args<Calrt_Calbin_GetCsr_Args>();
      args.calbin = w.calbin;
      args.model_name = w.decode.c_str();
      args.index = 0;
      return take(t.Calbin_GetCsr(&args));
    }
    case DeviceCall::kCalbinConfigure: {
      auto args = calrt::detail::make_args<Calrt_Calbin_Configure_Args>();
      args.calbin = w.spare_calbin;
      return take(t.Calbin_Configure(&args));
    }
    case DeviceCall::kBufferCreate: {
      auto args = calrt::detail::make_args<Calrt_Buffer_Create_Args>();
      args.calbin = w.calbin;
      args.model_name = w.decode.c_str();
      args.direction = CALRT_INPUT;
      return take(t.Buffer_Create(&args));
    }
    case DeviceCall::kBufferDestroy: {
      auto args = calrt::detail::make_args<Calrt_Buffer_Destroy_Args>();
      args.buffer = w.spare_in;
      return take(t.Buffer_Destroy(&args));
    }
    case DeviceCall::kBufferMap: {
      auto args = calrt::detail::make_args<Calrt_Buffer_Map_Args>();
      args.buffer = w.spare_in;
      args.tensor_index = 0;
      return take(t.Buffer_Map(&args));
    }
    case DeviceCall::kBufferUnmap: {
      auto args = calrt::detail::make_args<Calrt_Buffer_Unmap_Args>();
      args.buffer = w.spare_out;
      args.tensor_index = 0;
      return take(t.Buffer_Unmap(&args));
    }
    case DeviceCall::kBufferSetCsr: {
      auto args = calrt::detail::make_args<Calrt_Buffer_SetCsr_Args>();
      args.buffer = w.spare_in;
      args.csr_index = 0;
      args.value = 1;
      return take(t.Buffer_SetCsr(&args));
    }
    case DeviceCall::kBufferGetCsr: {
      auto args = calrt::detail::make_args<Calrt_Buffer_GetCsr_Args>();
      args.buffer = w.spare_in;
      args.csr_index = 0;
      return take(t.Buffer_GetCsr(&args));
    }
    case DeviceCall::kJobSubmit: {
      auto args = calrt::detail::make_args<Calrt_Job_Submit_Args>();
      args.calbin = w.calbin;
      args.model_name = w.decode.c_str();
      args.input = w.in1;
      args.output = w.out1;
      Outcome outcome = take(t.Job_Submit(&args));
      w.last_submitted = args.job;
      return outcome;
    }
    case DeviceCall::kJobWait:
      return w.wait(w.job, w.wait_timeout_ns);
    case DeviceCall::kJobStatus: {
      auto args = calrt::detail::make_args<Calrt_Job_Status_Args>();
      args.job = w.job;
      return take(t.Job_Status(&args));
    }
    case DeviceCall::kJobCancel: {
      auto args = calrt::detail::make_args<Calrt_Job_Cancel_Args>();
      args.job = w.job;
      return take(t.Job_Cancel(&args));
    }
    case DeviceCall::kJobDestroy: {
      auto args = calrt::detail::make_args<Calrt_Job_Destroy_Args>();
      args.job = w.job;
      return take(t.Job_Destroy(&args));
    }
    case DeviceCall::kKvAllocate: {
      auto args = calrt::detail::make_args<Calrt_Kv_Allocate_Args>();
      args.calbin = w.calbin;
      args.capacity_tokens = 1;
      return take(t.Kv_Allocate(&args));
    }
    case DeviceCall::kKvApply: {
      auto args = calrt::detail::make_args<Calrt_Kv_Apply_Args>();
      args.kv = w.spare_kv;
      args.input = w.spare_in;
      return take(t.Kv_Apply(&args));
    }
    case DeviceCall::kKvFree: {
      auto args = calrt::detail::make_args<Calrt_Kv_Free_Args>();
      args.kv = w.spare_kv;
      return take(t.Kv_Free(&args));
    }
    case DeviceCall::kKvClear: {
      auto args = calrt::detail::make_args<Calrt_Kv_Clear_Args>();
      args.kv = w.spare_kv;
      return take(t.Kv_Clear(&args));
    }
    case DeviceCall::kKvInfo: {
      auto args = calrt::detail::make_args<Calrt_Kv_Info_Args>();
      args.kv = w.spare_kv;
      return take(t.Kv_Info(&args));
    }
    case DeviceCall::kKvCapacity: {
      auto args = calrt::detail::make_args<Calrt_Kv_Capacity_Args>();
      args.calbin = w.calbin;
      return take(t.Kv_Capacity(&args));
    }
    case DeviceCall::kClockGet:
    case DeviceCall::kClockHostSpend: {
      const auto* clock =
          extension<CalrtClockExtension>(t, CALRT_EXT_CLOCK, CALRT_CLOCK_EXTENSION_STRUCT_SIZE);
      if (clock == nullptr) {
        return {CALRT_UNIMPLEMENTED, "no clock extension"};
      }
      if (call == DeviceCall::kClockGet) {
        auto args = calrt::detail::make_args<Calrt_Clock_Get_Args>();
        args.device = w.device;
        return take(clock->Clock_Get(&args));
      }
      auto args = calrt::detail::make_args<Calrt_Clock_HostSpend_Args>();
      args.device = w.device;
      args.duration_ns = 1000;
      return take(clock->Clock_HostSpend(&args));
    }
    case DeviceCall::kTraceEnable:
    case DeviceCall::kTraceRead: {
      const auto* trace =
          extension<CalrtTraceExtension>(t, CALRT_EXT_TRACE, CALRT_TRACE_EXTENSION_STRUCT_SIZE);
      if (trace == nullptr) {
        return {CALRT_UNIMPLEMENTED, "no trace extension"};
      }
      if (call == DeviceCall::kTraceEnable) {
        auto args = calrt::detail::make_args<Calrt_Trace_Enable_Args>();
        args.device = w.device;
        args.enable = 1;
        return take(trace->Trace_Enable(&args));
      }
      CalrtTraceEvent events[8];
      auto args = calrt::detail::make_args<Calrt_Trace_Read_Args>();
      args.device = w.device;
      args.events = events;
      args.event_struct_size = sizeof(CalrtTraceEvent);
      args.capacity = std::size(events);
      return take(trace->Trace_Read(&args));
    }
    case DeviceCall::kFaultSetPlan:
    case DeviceCall::kFaultGetHits: {
      const auto* faults =
          extension<CalrtFaultExtension>(t, CALRT_EXT_FAULT, CALRT_FAULT_EXTENSION_STRUCT_SIZE);
      if (faults == nullptr) {
        return {CALRT_UNIMPLEMENTED, "no fault extension"};
      }
      if (call == DeviceCall::kFaultSetPlan) {
        auto args = calrt::detail::make_args<Calrt_Fault_SetPlan_Args>();
        args.device = w.device;
        args.plan = "";  // the empty plan: injects nothing
        args.plan_size = 0;
        return take(faults->Fault_SetPlan(&args));
      }
      CalrtFaultHit hits[128];
      auto args = calrt::detail::make_args<Calrt_Fault_GetHits_Args>();
      args.device = w.device;
      args.hits = hits;
      args.hit_struct_size = sizeof(CalrtFaultHit);
      args.capacity = std::size(hits);
      return take(faults->Fault_GetHits(&args));
    }
    case DeviceCall::kDiagReport:
    case DeviceCall::kDiagStateHash: {
      const auto* diag =
          extension<CalrtDiagExtension>(t, CALRT_EXT_DIAG, CALRT_DIAG_EXTENSION_STRUCT_SIZE);
      if (diag == nullptr) {
        return {CALRT_UNIMPLEMENTED, "no diag extension"};
      }
      if (call == DeviceCall::kDiagReport) {
        auto args = calrt::detail::make_args<Calrt_Diag_Report_Args>();
        args.device = w.device;
        return take(diag->Diag_Report(&args));  // capacity 0: asks for the size only
      }
      auto args = calrt::detail::make_args<Calrt_Diag_StateHash_Args>();
      args.device = w.device;
      return take(diag->Diag_StateHash(&args));
    }
  }
  return {CALRT_INTERNAL, "DeviceCall " + std::to_string(static_cast<int>(call)) + " unknown"};
}

// Drives a fresh world into `state`; the job calls then act on the job named in comments.
void drive(World& w, CalrtDeviceState state) {
  switch (state) {
    case CALRT_DEVICE_OPEN: {
      // A chip reset drops every configuration and KV handle; buffers and jobs survive
      // (README "Resets"), so the buffer and job calls have objects to act on.
      auto reset = calrt::detail::make_args<Calrt_Device_Reset_Args>();
      reset.device = w.device;
      reset.level = CALRT_RESET_CHIP;
      w.ok("Device_Reset", w.t.Device_Reset(&reset));
      break;
    }
    case CALRT_DEVICE_CONFIGURED:
      break;  // the completed first job
    case CALRT_DEVICE_RUNNING:
      w.job = w.submit(w.in0, w.out0);  // in flight: the virtual clock stands still
      break;
    case CALRT_DEVICE_FAULTED:
    case CALRT_DEVICE_LOST_STATE: {
      const bool lost = state == CALRT_DEVICE_LOST_STATE;
      w.set_plan(std::string("seed: 1\nfaults:\n  - kind: ") + (lost ? "device_lost" : "dma_h2d") +
                 "\n    during: decode\n    at_op: 1\n");
      w.job = w.submit(w.in0, w.out0);
      CalrtJobState job_state = CALRT_JOB_SUBMITTED;
      const Outcome waited = w.wait(w.job, CALRT_TIMEOUT_DEFAULT, &job_state);
      EXPECT_EQ(waited.code, lost ? CALRT_DEVICE_LOST : CALRT_DMA_ERROR) << waited.message;
      EXPECT_EQ(job_state, CALRT_JOB_FAILED);
      break;
    }
    default:
      ADD_FAILURE() << "no way to drive a device into " << device_state_name(state);
  }
}

// The code an allowed call returns in the world of `state`: OK unless the objects it acts on
// say otherwise, for reasons documented outside the state machine.
CalrtCode expected_when_allowed(DeviceCall call, CalrtDeviceState state) {
  if (state == CALRT_DEVICE_OPEN) {
    switch (call) {
      case DeviceCall::kBufferCreate:
      case DeviceCall::kJobSubmit:
      case DeviceCall::kKvAllocate:
      case DeviceCall::kKvCapacity:
        return CALRT_NOT_CONFIGURED;  // the chip reset dropped the configuration
      case DeviceCall::kKvApply:
      case DeviceCall::kKvFree:
      case DeviceCall::kKvClear:
      case DeviceCall::kKvInfo:
        return CALRT_INVALID_HANDLE;  // ... and released every KV handle
      default:
        return CALRT_OK;
    }
  }
  if (state == CALRT_DEVICE_FAULTED && call == DeviceCall::kJobWait) {
    return CALRT_DMA_ERROR;  // calrt.h: Job_Wait reports the device fault that failed the job
  }
  return CALRT_OK;
}

CalrtCode documented_code(const std::string& cell) {
  if (cell == "ok") {
    return CALRT_OK;
  }
  if (cell == "WRONG_STATE") {
    return CALRT_WRONG_STATE;
  }
  if (cell == "DEVICE_LOST") {
    return CALRT_DEVICE_LOST;
  }
  ADD_FAILURE() << "STATE_MACHINE.md has the cell \"" << cell << "\"";
  return CALRT_INTERNAL;
}

class EveryCallInState : public ::testing::TestWithParam<CalrtDeviceState> {};

// Expected codes come from STATE_MACHINE.md, not from the code's table.
TEST_P(EveryCallInState, ReturnsWhatStateMachineMdSays) {
  const CalrtDeviceState state = GetParam();
  const std::string state_name = device_state_name(state);
  const auto documented = documented_calls();
  ASSERT_EQ(documented.size(), kDeviceCallCount);
  for (size_t i = 0; i < kDeviceCallCount; ++i) {
    const DeviceCall call = call_at(i);
    const std::string name = call_name(call);
    SCOPED_TRACE(name + " in " + state_name);
    ASSERT_TRUE(documented.count(name)) << "STATE_MACHINE.md has no row " << name;
    const CalrtCode refusal = documented_code(documented.at(name).at(state_name));
    World w(*calrt_sim_get_api(CALRT_ABI_MAJOR), "", /*run_first_job=*/true);
    drive(w, state);
    ASSERT_EQ(w.state(), state) << "the world is not in the state under test";
    const Outcome outcome = invoke(w, call);
    if (refusal == CALRT_OK) {
      EXPECT_EQ(outcome.code, expected_when_allowed(call, state)) << outcome.message;
    } else {
      EXPECT_EQ(outcome.code, refusal) << outcome.message;
      EXPECT_NE(outcome.message.find(name + " is not allowed: device is " + state_name),
                std::string::npos)
          << outcome.message;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(States, EveryCallInState,
                         ::testing::Values(CALRT_DEVICE_OPEN, CALRT_DEVICE_CONFIGURED,
                                           CALRT_DEVICE_RUNNING, CALRT_DEVICE_FAULTED,
                                           CALRT_DEVICE_LOST_STATE),
                         [](const ::testing::TestParamInfo<CalrtDeviceState>& param) {
                           return std::string(device_state_name(param.param));
                         });

// The refusal names the fault's cause and the reset level that clears it.
TEST(StateMachine, AFaultedRefusalSaysWhatClearsIt) {
  World w(*calrt_sim_get_api(CALRT_ABI_MAJOR), "", /*run_first_job=*/true);
  drive(w, CALRT_DEVICE_FAULTED);
  const Outcome outcome = invoke(w, DeviceCall::kJobSubmit);
  EXPECT_EQ(outcome.code, CALRT_WRONG_STATE);
  // FAULTS.md: a dma_h2d fault is cleared by a job_abort reset.
  EXPECT_NE(outcome.message.find("job_abort"), std::string::npos) << outcome.message;
  EXPECT_NE(outcome.message.find("dma_h2d"), std::string::npos) << outcome.message;
}

// ---------------------------------------------------------------------------------------
// No deadlock: libcalrt_sim.so, paced clock, one thread in Job_Wait, the other calling.
// ---------------------------------------------------------------------------------------

TEST(StateMachine, NoCallDeadlocksWhileAnotherThreadWaits) {
#ifndef CALRT_SIM_SO
  GTEST_SKIP() << "libcalrt_sim.so is not part of this build";
#else
  const calrt::Api runtime = calrt::load_runtime(CALRT_SIM_SO);
  // The waited job would start after 20 s of wall time; every call below must be done
  // long before, or the waiter sees COMPLETED instead of the final reset's CANCELLED.
  World w(*runtime.table(), "clock=paced;submit_overhead_ns=20000000000", false);
  w.wait_timeout_ns = 1'000'000;  // the caller's own Job_Wait: 1 ms of paced time
  CalrtJob* waited = w.submit(w.in0, w.out0);
  ASSERT_NE(waited, nullptr);
  std::promise<void> waiting;
  auto waiter = std::async(std::launch::async, [&] {
    auto args = calrt::detail::make_args<Calrt_Job_Wait_Args>();
    args.job = waited;
    args.timeout_ns = 60'000'000'000;
    waiting.set_value();
    const Outcome outcome = take_from(w.t, w.t.Job_Wait(&args));
    return std::make_pair(outcome, args.state);
  });
  waiting.get_future().wait();
  auto caller = std::async(std::launch::async, [&] {
    std::vector<std::pair<std::string, Outcome>> outcomes;
    for (size_t i = 0; i < kDeviceCallCount; ++i) {
      const DeviceCall call = call_at(i);
      if (call == DeviceCall::kDeviceReset) {
        continue;  // last: it ends the waited job
      }
      outcomes.emplace_back(call_name(call), invoke(w, call));
      if (call == DeviceCall::kJobSubmit && w.last_submitted != nullptr) {
        w.job = w.last_submitted;  // the job calls act on this second job
      }
    }
    return outcomes;
  });
  if (caller.wait_for(60s) != std::future_status::ready) {
    // A deadlocked call cannot be unwound: its future's destructor would wait forever.
    ADD_FAILURE() << "a call did not return within 60 s while another thread waited";
    std::fflush(stdout);
    std::_Exit(1);
  }
  for (const auto& [name, outcome] : caller.get()) {
    EXPECT_NE(outcome.code, CALRT_INTERNAL) << name << ": " << outcome.message;
  }
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout)
      << "the waiter returned before anything ended its job";
  EXPECT_EQ(invoke(w, DeviceCall::kDeviceReset).code, CALRT_OK);
  if (waiter.wait_for(60s) != std::future_status::ready) {
    ADD_FAILURE() << "the reset did not wake the waiter within 60 s";
    std::fflush(stdout);
    std::_Exit(1);
  }
  const auto [outcome, job_state] = waiter.get();
  EXPECT_EQ(outcome.code, CALRT_OK) << outcome.message;
  EXPECT_EQ(job_state, CALRT_JOB_CANCELLED);
#endif
}

}  // namespace
}  // namespace simdev::test
