// Replay of a calrt-calls/1 recording. Calls go through the raw C table, not calrt.hpp, so
// that struct sizes, enum values and handles (forged or released ones included) reach the
// runtime exactly as they were recorded.
#include "runner/tools/replay.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <utility>

#include <nlohmann/json.hpp>

#include "abi/calrt_ext.h"
#include "abi/calrt_loader.hpp"
#include "abi/validate/codec.hpp"
#include "abi/validate/validate_layer.hpp"
#include "runner/core/device/device_select.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/core/report/report.hpp"

namespace runner {
namespace {

using json = nlohmann::json;

// Bounds what a recorded capacity may make the replay allocate (trace events, hits, report).
constexpr uint64_t kMaxReplayBuffer = uint64_t{256} * 1024 * 1024;

struct Line {
  size_t number = 0;  // 1-based line in the file
  uint64_t seq = 0;
  std::string call;
  json in;
  json out;
  uint32_t code = 0;
  bool refused = false;  // the layer refused it: it never reached the recorded runtime
};

std::string job_state_name(int64_t state) {
  if (state >= 1 && state < CALRT_JOB_STATE_COUNT_) {
    return calrt::to_string(static_cast<calrt::JobState>(state));
  }
  return std::to_string(state);
}

std::string code_text(uint32_t code) { return calrt::code_name(static_cast<CalrtCode>(code)); }

class Replayer {
 public:
  Replayer(const calrt::Api& api, std::filesystem::path file,
           std::optional<std::filesystem::path> calbin)
      : api_(api), table_(*api.table()), file_(std::move(file)), calbin_(std::move(calbin)) {
    for (auto* ext = static_cast<const CalrtExtensionBase*>(table_.extension); ext != nullptr;
         ext = ext->next) {
      if (ext->type == CALRT_EXT_CLOCK && ext->struct_size >= CALRT_CLOCK_EXTENSION_STRUCT_SIZE) {
        clock_ = reinterpret_cast<const CalrtClockExtension*>(ext);
      } else if (ext->type == CALRT_EXT_TRACE &&
                 ext->struct_size >= CALRT_TRACE_EXTENSION_STRUCT_SIZE) {
        trace_ = reinterpret_cast<const CalrtTraceExtension*>(ext);
      } else if (ext->type == CALRT_EXT_FAULT &&
                 ext->struct_size >= CALRT_FAULT_EXTENSION_STRUCT_SIZE) {
        fault_ = reinterpret_cast<const CalrtFaultExtension*>(ext);
      } else if (ext->type == CALRT_EXT_DIAG &&
                 ext->struct_size >= CALRT_DIAG_EXTENSION_STRUCT_SIZE) {
        diag_ = reinterpret_cast<const CalrtDiagExtension*>(ext);
      }
    }
  }

  ReplayResult run() {
    const std::vector<Line> lines = read();
    for (const Line& line : lines) {
      if (line.refused) {
        ++result_.skipped;
        continue;
      }
      ++result_.calls;
      replay(line);
    }
    cleanup();
    return std::move(result_);
  }

 private:
  [[noreturn]] void bad(size_t line, const std::string& field, const std::string& why) const {
    throw ReplayInputError(file_.string() + ":" + std::to_string(line) + ": field '" + field +
                           "': " + why);
  }

  std::vector<Line> read() {
    std::ifstream stream(file_);
    if (!stream) {
      throw ReplayInputError(file_.string() + ": cannot open the recording");
    }
    std::string text;
    size_t number = 0;
    std::vector<Line> lines;
    while (std::getline(stream, text)) {
      ++number;
      if (text.empty()) {
        continue;
      }
      json doc = json::parse(text, nullptr, false);
      if (doc.is_discarded() || !doc.is_object()) {
        // A recording cut short by a kill ends in a partial line: the calls before it count.
        if (stream.peek() == std::char_traits<char>::eof() && number > 1) {
          break;
        }
        bad(number, "(line)", "not a JSON object");
      }
      if (number == 1) {
        if (!doc.contains("schema") || doc["schema"] != calrt::validate::kRecordSchema) {
          bad(number, "schema",
              "expected \"" + std::string(calrt::validate::kRecordSchema) + "\", got " +
                  (doc.contains("schema") ? doc["schema"].dump() : "nothing"));
        }
        continue;
      }
      Line line;
      line.number = number;
      if (!doc.contains("seq") || !doc["seq"].is_number_unsigned()) {
        bad(number, "seq", "missing or not an unsigned integer");
      }
      line.seq = doc["seq"].get<uint64_t>();
      if (!doc.contains("call") || !doc["call"].is_string()) {
        bad(number, "call", "missing or not a string");
      }
      line.call = doc["call"].get<std::string>();
      if (!doc.contains("in") || !doc["in"].is_object()) {
        bad(number, "in", "missing or not an object");
      }
      line.in = doc["in"];
      line.out = doc.value("out", json::object());
      if (!doc.contains("code") || !doc["code"].is_number_unsigned()) {
        bad(number, "code", "missing or not an unsigned integer");
      }
      line.code = doc["code"].get<uint32_t>();
      if (doc.contains("violations")) {
        for (const json& v : doc["violations"]) {
          line.refused = line.refused || v.value("refused", false);
        }
      }
      lines.push_back(std::move(line));
    }
    if (number == 0) {
      throw ReplayInputError(file_.string() + ":1: field 'schema': the recording is empty");
    }
    // Threads record when their call returns; the seq says when it entered the layer.
    std::stable_sort(lines.begin(), lines.end(),
                     [](const Line& a, const Line& b) { return a.seq < b.seq; });
    for (const Line& line : lines) {
      for (const auto& [field, value] : line.out.items()) {
        if (value.is_string() && value.get<std::string>().find('#') != std::string::npos) {
          defined_.insert(value.get<std::string>());
        }
      }
    }
    return lines;
  }

  // --- reading fields ---------------------------------------------------------------------
  uint64_t u64(const Line& line, const char* field) const {
    if (!line.in.contains(field) || !line.in[field].is_number_unsigned()) {
      bad(line.number, std::string("in.") + field, "missing or not an unsigned integer");
    }
    return line.in[field].get<uint64_t>();
  }
  uint32_t u32(const Line& line, const char* field) const {
    const uint64_t value = u64(line, field);
    if (value > UINT32_MAX) {
      bad(line.number, std::string("in.") + field, std::to_string(value) + " exceeds 32 bits");
    }
    return static_cast<uint32_t>(value);
  }
  int enum_value(const Line& line, const char* field) const {
    if (!line.in.contains(field) || !line.in[field].is_number_integer()) {
      bad(line.number, std::string("in.") + field, "missing or not an integer");
    }
    return static_cast<int>(line.in[field].get<int64_t>());
  }
  // A string, or NULL for a recorded null.
  std::optional<std::string> text(const Line& line, const char* field) const {
    if (!line.in.contains(field) || line.in[field].is_null()) {
      return std::nullopt;
    }
    if (!line.in[field].is_string()) {
      bad(line.number, std::string("in.") + field, "not a string");
    }
    return line.in[field].get<std::string>();
  }
  template <class T>
  T* handle(const Line& line, const char* field) const {
    if (!line.in.contains(field) || line.in[field].is_null()) {
      return nullptr;
    }
    if (!line.in[field].is_string()) {
      bad(line.number, std::string("in.") + field, "not a handle id");
    }
    const std::string id = line.in[field].get<std::string>();
    if (!id.empty() && id.back() == '?') {
      // A handle the recorded runtime never issued: a value this one never issues either.
      return reinterpret_cast<T*>(uintptr_t{0x7e57'0000'0000'0010});
    }
    if (auto it = handles_.find(id); it != handles_.end()) {
      return static_cast<T*>(it->second);
    }
    if (defined_.count(id) == 0) {
      bad(line.number, std::string("in.") + field,
          "'" + id + "' is not created by any call of the recording");
    }
    return nullptr;  // its creation diverged already
  }
  void created(const Line& line, const char* field, void* value) {
    if (line.out.contains(field) && line.out[field].is_string()) {
      handles_[line.out[field].get<std::string>()] = value;
    }
  }

  template <class Args>
  Args args(const Line& line, size_t size) const {
    Args a{};
    a.struct_size = line.in.contains("struct_size") ? u64(line, "struct_size") : size;
    return a;
  }

  // --- comparing --------------------------------------------------------------------------
  void diverge(const Line& line, std::string what, std::string expected, std::string got) {
    result_.divergences.push_back(
        {line.seq, line.call, std::move(what), std::move(expected), std::move(got)});
  }
  // Compares the call's result code; true when the call succeeded here and when recorded.
  bool result(const Line& line, CalrtError* error) {
    uint32_t code = CALRT_OK;
    std::string message;
    if (error != nullptr) {
      auto code_args = calrt::detail::make_args<Calrt_Error_GetCode_Args>();
      code_args.error = error;
      table_.Error_GetCode(&code_args);
      code = static_cast<uint32_t>(code_args.code);
      auto message_args = calrt::detail::make_args<Calrt_Error_Message_Args>();
      message_args.error = error;
      table_.Error_Message(&message_args);
      if (message_args.message != nullptr) {
        message.assign(message_args.message, message_args.message_size);
      }
      api_.discard(error);
    }
    if (code != line.code) {
      diverge(line, "code", code_text(line.code),
              code_text(code) + (message.empty() ? "" : " (" + message + ")"));
    }
    return code == CALRT_OK && line.code == CALRT_OK;
  }
  void compare(const Line& line, const char* field, const std::string& got,
               std::string (*name)(int64_t) = nullptr) {
    if (!line.out.contains(field)) {
      return;
    }
    const json& expected = line.out[field];
    std::string expected_text =
        expected.is_string() ? expected.get<std::string>() : expected.dump();
    std::string got_text = got;
    if (name != nullptr && expected.is_number_integer()) {
      expected_text = name(expected.get<int64_t>());
    }
    if (expected_text != got_text) {
      diverge(line, field, expected_text, got_text);
    }
  }

  // --- the calls --------------------------------------------------------------------------
  template <class Fn>
  Fn* entry(Fn* CalrtApi::*field, size_t offset, const Line& line) const {
    if (offset + sizeof(Fn*) > table_.struct_size || table_.*field == nullptr) {
      bad(line.number, "call", line.call + " is not implemented by the replay runtime");
    }
    return table_.*field;
  }
#define REPLAY_ENTRY(Name) entry(&CalrtApi::Name, offsetof(CalrtApi, Name), line)
#define REPLAY_ARGS(Name, SIZE) auto a = args<Calrt_##Name##_Args>(line, SIZE)

  void replay(const Line& line) {
    const std::string& c = line.call;
    if (c == "Device_Create") {
      REPLAY_ARGS(Device_Create, CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE);
      const int kind = enum_value(line, "kind");
      std::memcpy(&a.kind, &kind, sizeof(kind));
      a.index = u32(line, "index");
      const auto config = text(line, "config");
      a.config = config ? config->c_str() : nullptr;
      a.timeout_ns = u64(line, "timeout_ns");
      if (result(line, REPLAY_ENTRY(Device_Create)(&a))) {
        created(line, "device", a.device);
        live_devices_.insert(a.device);
      }
    } else if (c == "Device_Destroy") {
      REPLAY_ARGS(Device_Destroy, CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      if (result(line, REPLAY_ENTRY(Device_Destroy)(&a))) {
        live_devices_.erase(a.device);
      }
    } else if (c == "Device_Status") {
      REPLAY_ARGS(Device_Status, CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      result(line, REPLAY_ENTRY(Device_Status)(&a));
    } else if (c == "Device_ChipStatus") {
      REPLAY_ARGS(Device_ChipStatus, CALRT_DEVICE_CHIPSTATUS_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      a.chip = u32(line, "chip");
      result(line, REPLAY_ENTRY(Device_ChipStatus)(&a));
    } else if (c == "Device_Reset") {
      REPLAY_ARGS(Device_Reset, CALRT_DEVICE_RESET_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      const int level = enum_value(line, "level");
      std::memcpy(&a.level, &level, sizeof(level));
      a.timeout_ns = u64(line, "timeout_ns");
      result(line, REPLAY_ENTRY(Device_Reset)(&a));
    } else if (c == "Device_SetParallelMode") {
      REPLAY_ARGS(Device_SetParallelMode, CALRT_DEVICE_SETPARALLELMODE_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      a.enable = u32(line, "enable");
      result(line, REPLAY_ENTRY(Device_SetParallelMode)(&a));
    } else if (c == "Calbin_Create") {
      REPLAY_ARGS(Calbin_Create, CALRT_CALBIN_CREATE_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      std::optional<std::string> path = text(line, "path");
      if (calbin_ && path) {
        path = calbin_->string();
      }
      a.path = path ? path->c_str() : nullptr;
      a.timeout_ns = u64(line, "timeout_ns");
      if (result(line, REPLAY_ENTRY(Calbin_Create)(&a))) {
        created(line, "calbin", a.calbin);
      }
    } else if (c == "Calbin_Destroy") {
      REPLAY_ARGS(Calbin_Destroy, CALRT_CALBIN_DESTROY_ARGS_STRUCT_SIZE);
      a.calbin = handle<CalrtCalbin>(line, "calbin");
      result(line, REPLAY_ENTRY(Calbin_Destroy)(&a));
    } else if (c == "Calbin_GetInfo") {
      REPLAY_ARGS(Calbin_GetInfo, CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE);
      a.calbin = handle<CalrtCalbin>(line, "calbin");
      result(line, REPLAY_ENTRY(Calbin_GetInfo)(&a));
    } else if (c == "Calbin_GetModel") {
      REPLAY_ARGS(Calbin_GetModel, CALRT_CALBIN_GETMODEL_ARGS_STRUCT_SIZE);
      a.calbin = handle<CalrtCalbin>(line, "calbin");
      a.model_index = u32(line, "model_index");
      result(line, REPLAY_ENTRY(Calbin_GetModel)(&a));
    } else if (c == "Calbin_GetTensor") {
      REPLAY_ARGS(Calbin_GetTensor, CALRT_CALBIN_GETTENSOR_ARGS_STRUCT_SIZE);
      a.calbin = handle<CalrtCalbin>(line, "calbin");
      const auto model = text(line, "model_name");
      a.model_name = model ? model->c_str() : nullptr;
      const int direction = enum_value(line, "direction");
      std::memcpy(&a.direction, &direction, sizeof(direction));
      a.index = u32(line, "index");
      result(line, REPLAY_ENTRY(Calbin_GetTensor)(&a));
    } else if (c == "Calbin_GetCsr") {
      REPLAY_ARGS(Calbin_GetCsr, CALRT_CALBIN_GETCSR_ARGS_STRUCT_SIZE);
      a.calbin = handle<CalrtCalbin>(line, "calbin");
      const auto model = text(line, "model_name");
      a.model_name = model ? model->c_str() : nullptr;
      a.index = u32(line, "index");
      result(line, REPLAY_ENTRY(Calbin_GetCsr)(&a));
    } else if (c == "Calbin_Configure") {
      REPLAY_ARGS(Calbin_Configure, CALRT_CALBIN_CONFIGURE_ARGS_STRUCT_SIZE);
      a.calbin = handle<CalrtCalbin>(line, "calbin");
      a.timeout_ns = u64(line, "timeout_ns");
      result(line, REPLAY_ENTRY(Calbin_Configure)(&a));
    } else if (c == "Buffer_Create") {
      REPLAY_ARGS(Buffer_Create, CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE);
      a.calbin = handle<CalrtCalbin>(line, "calbin");
      const auto model = text(line, "model_name");
      a.model_name = model ? model->c_str() : nullptr;
      const int direction = enum_value(line, "direction");
      std::memcpy(&a.direction, &direction, sizeof(direction));
      a.slot = u32(line, "slot");
      if (result(line, REPLAY_ENTRY(Buffer_Create)(&a))) {
        created(line, "buffer", a.buffer);
      }
    } else if (c == "Buffer_Destroy") {
      REPLAY_ARGS(Buffer_Destroy, CALRT_BUFFER_DESTROY_ARGS_STRUCT_SIZE);
      a.buffer = handle<CalrtBuffer>(line, "buffer");
      result(line, REPLAY_ENTRY(Buffer_Destroy)(&a));
    } else if (c == "Buffer_Map") {
      REPLAY_ARGS(Buffer_Map, CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE);
      a.buffer = handle<CalrtBuffer>(line, "buffer");
      a.tensor_index = u32(line, "tensor_index");
      a.timeout_ns = u64(line, "timeout_ns");
      if (result(line, REPLAY_ENTRY(Buffer_Map)(&a))) {
        mappings_[{a.buffer, a.tensor_index}] = {static_cast<unsigned char*>(a.data), a.size_bytes};
        compare(line, "size_bytes", std::to_string(a.size_bytes));
      }
    } else if (c == "Buffer_Unmap") {
      REPLAY_ARGS(Buffer_Unmap, CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE);
      a.buffer = handle<CalrtBuffer>(line, "buffer");
      a.tensor_index = u32(line, "tensor_index");
      unmap_data(line, a.buffer, a.tensor_index);
      if (result(line, REPLAY_ENTRY(Buffer_Unmap)(&a))) {
        mappings_.erase({a.buffer, a.tensor_index});
      }
    } else if (c == "Buffer_SetCsr") {
      REPLAY_ARGS(Buffer_SetCsr, CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE);
      a.buffer = handle<CalrtBuffer>(line, "buffer");
      a.csr_index = u32(line, "csr_index");
      a.value = u64(line, "value");
      result(line, REPLAY_ENTRY(Buffer_SetCsr)(&a));
    } else if (c == "Buffer_GetCsr") {
      REPLAY_ARGS(Buffer_GetCsr, CALRT_BUFFER_GETCSR_ARGS_STRUCT_SIZE);
      a.buffer = handle<CalrtBuffer>(line, "buffer");
      a.csr_index = u32(line, "csr_index");
      if (result(line, REPLAY_ENTRY(Buffer_GetCsr)(&a))) {
        compare(line, "value", std::to_string(a.value));
      }
    } else if (c == "Job_Submit") {
      REPLAY_ARGS(Job_Submit, CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE);
      a.calbin = handle<CalrtCalbin>(line, "calbin");
      const auto model = text(line, "model_name");
      a.model_name = model ? model->c_str() : nullptr;
      a.input = handle<CalrtBuffer>(line, "input");
      a.output = handle<CalrtBuffer>(line, "output");
      if (result(line, REPLAY_ENTRY(Job_Submit)(&a))) {
        created(line, "job", a.job);
      }
    } else if (c == "Job_Wait") {
      REPLAY_ARGS(Job_Wait, CALRT_JOB_WAIT_ARGS_STRUCT_SIZE);
      a.job = handle<CalrtJob>(line, "job");
      a.timeout_ns = u64(line, "timeout_ns");
      if (result(line, REPLAY_ENTRY(Job_Wait)(&a))) {
        compare(line, "result", std::to_string(static_cast<int>(a.result)));
        compare(line, "state", job_state_name(a.state), &job_state_name);
      }
    } else if (c == "Job_Status") {
      REPLAY_ARGS(Job_Status, CALRT_JOB_STATUS_ARGS_STRUCT_SIZE);
      a.job = handle<CalrtJob>(line, "job");
      if (result(line, REPLAY_ENTRY(Job_Status)(&a))) {
        compare(line, "state", job_state_name(a.state), &job_state_name);
        compare(line, "code", std::to_string(static_cast<uint32_t>(a.code)));
      }
    } else if (c == "Job_Cancel") {
      REPLAY_ARGS(Job_Cancel, CALRT_JOB_CANCEL_ARGS_STRUCT_SIZE);
      a.job = handle<CalrtJob>(line, "job");
      result(line, REPLAY_ENTRY(Job_Cancel)(&a));
    } else if (c == "Job_Destroy") {
      REPLAY_ARGS(Job_Destroy, CALRT_JOB_DESTROY_ARGS_STRUCT_SIZE);
      a.job = handle<CalrtJob>(line, "job");
      result(line, REPLAY_ENTRY(Job_Destroy)(&a));
    } else if (c == "Kv_Allocate") {
      REPLAY_ARGS(Kv_Allocate, CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE);
      a.calbin = handle<CalrtCalbin>(line, "calbin");
      a.capacity_tokens = u32(line, "capacity_tokens");
      if (result(line, REPLAY_ENTRY(Kv_Allocate)(&a))) {
        created(line, "kv", a.kv);
      }
    } else if (c == "Kv_Apply") {
      REPLAY_ARGS(Kv_Apply, CALRT_KV_APPLY_ARGS_STRUCT_SIZE);
      a.kv = handle<CalrtKv>(line, "kv");
      a.input = handle<CalrtBuffer>(line, "input");
      a.row = line.in.contains("row") ? u32(line, "row") : 0;  // recorded since ABI 0.8
      result(line, REPLAY_ENTRY(Kv_Apply)(&a));
    } else if (c == "Kv_Free") {
      REPLAY_ARGS(Kv_Free, CALRT_KV_FREE_ARGS_STRUCT_SIZE);
      a.kv = handle<CalrtKv>(line, "kv");
      result(line, REPLAY_ENTRY(Kv_Free)(&a));
    } else if (c == "Kv_Clear") {
      REPLAY_ARGS(Kv_Clear, CALRT_KV_CLEAR_ARGS_STRUCT_SIZE);
      a.kv = handle<CalrtKv>(line, "kv");
      result(line, REPLAY_ENTRY(Kv_Clear)(&a));
    } else if (c == "Kv_Info") {
      REPLAY_ARGS(Kv_Info, CALRT_KV_INFO_ARGS_STRUCT_SIZE);
      a.kv = handle<CalrtKv>(line, "kv");
      if (result(line, REPLAY_ENTRY(Kv_Info)(&a))) {
        compare(line, "capacity_tokens", std::to_string(a.capacity_tokens));
        compare(line, "filled_tokens", std::to_string(a.filled_tokens));
      }
    } else if (c == "Kv_Capacity") {
      REPLAY_ARGS(Kv_Capacity, CALRT_KV_CAPACITY_ARGS_STRUCT_SIZE);
      a.calbin = handle<CalrtCalbin>(line, "calbin");
      result(line, REPLAY_ENTRY(Kv_Capacity)(&a));
    } else {
      replay_extension(line);
    }
  }

  template <class Ext>
  const Ext& extension(const Ext* ext, const Line& line) const {
    if (ext == nullptr) {
      bad(line.number, "call", line.call + " needs an extension the replay runtime lacks");
    }
    return *ext;
  }
  size_t bounded(const Line& line, const char* count, const char* element) const {
    const uint64_t n = u64(line, count);
    const uint64_t size = u64(line, element);
    if (size != 0 && n > kMaxReplayBuffer / size) {
      bad(line.number, std::string("in.") + count,
          std::to_string(n) + " x " + std::to_string(size) + " bytes exceeds the replay's bound");
    }
    return static_cast<size_t>(n * size);
  }

  void replay_extension(const Line& line) {
    const std::string& c = line.call;
    if (c == "Clock_Get") {
      REPLAY_ARGS(Clock_Get, CALRT_CLOCK_GET_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      result(line, extension(clock_, line).Clock_Get(&a));
    } else if (c == "Clock_HostSpend") {
      REPLAY_ARGS(Clock_HostSpend, CALRT_CLOCK_HOST_SPEND_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      a.duration_ns = u64(line, "duration_ns");
      result(line, extension(clock_, line).Clock_HostSpend(&a));
    } else if (c == "Trace_Enable") {
      REPLAY_ARGS(Trace_Enable, CALRT_TRACE_ENABLE_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      a.enable = u32(line, "enable");
      a.capacity_events = u64(line, "capacity_events");
      result(line, extension(trace_, line).Trace_Enable(&a));
    } else if (c == "Trace_Read") {
      REPLAY_ARGS(Trace_Read, CALRT_TRACE_READ_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      std::vector<unsigned char> room(bounded(line, "capacity", "event_struct_size"));
      a.events = room.empty() ? nullptr : reinterpret_cast<CalrtTraceEvent*>(room.data());
      a.event_struct_size = u64(line, "event_struct_size");
      a.capacity = u64(line, "capacity");
      if (result(line, extension(trace_, line).Trace_Read(&a))) {
        compare(line, "count", std::to_string(a.count));
      }
    } else if (c == "Fault_SetPlan") {
      REPLAY_ARGS(Fault_SetPlan, CALRT_FAULT_SET_PLAN_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      const auto plan = text(line, "plan");
      a.plan = plan ? plan->c_str() : nullptr;
      a.plan_size = u64(line, "plan_size");
      if (plan && a.plan_size > plan->size()) {
        bad(line.number, "in.plan_size", "larger than the recorded plan");
      }
      result(line, extension(fault_, line).Fault_SetPlan(&a));
    } else if (c == "Fault_GetHits") {
      REPLAY_ARGS(Fault_GetHits, CALRT_FAULT_GET_HITS_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      std::vector<unsigned char> room(bounded(line, "capacity", "hit_struct_size"));
      a.hits = room.empty() ? nullptr : reinterpret_cast<CalrtFaultHit*>(room.data());
      a.hit_struct_size = u64(line, "hit_struct_size");
      a.capacity = u64(line, "capacity");
      result(line, extension(fault_, line).Fault_GetHits(&a));
    } else if (c == "Diag_Report") {
      REPLAY_ARGS(Diag_Report, CALRT_DIAG_REPORT_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      a.capacity = static_cast<size_t>(u64(line, "capacity"));
      if (a.capacity > kMaxReplayBuffer) {
        bad(line.number, "in.capacity", "exceeds the replay's bound");
      }
      std::vector<char> room(a.capacity);
      a.buffer = room.empty() ? nullptr : room.data();
      result(line, extension(diag_, line).Diag_Report(&a));
    } else if (c == "Diag_StateHash") {
      REPLAY_ARGS(Diag_StateHash, CALRT_DIAG_STATE_HASH_ARGS_STRUCT_SIZE);
      a.device = handle<CalrtDevice>(line, "device");
      result(line, extension(diag_, line).Diag_StateHash(&a));
    } else {
      bad(line.number, "call", "unknown call '" + c + "'");
    }
  }
#undef REPLAY_ENTRY
#undef REPLAY_ARGS

  // Writes the recorded input bytes into the mapping before it is unmapped, and compares
  // an output's bytes with the recorded hash.
  void unmap_data(const Line& line, CalrtBuffer* buffer, uint32_t tensor) {
    auto it = mappings_.find({buffer, tensor});
    if (it == mappings_.end()) {
      return;
    }
    const auto [data, size] = it->second;
    if (line.in.contains("data")) {
      if (!line.in["data"].is_string()) {
        bad(line.number, "in.data", "not a base64 string");
      }
      const auto bytes = calrt::validate::base64_decode(line.in["data"].get<std::string>());
      if (!bytes) {
        bad(line.number, "in.data", "not valid base64");
      }
      if (bytes->size() != size) {
        diverge(line, "mapped size", std::to_string(bytes->size()), std::to_string(size));
        return;
      }
      std::memcpy(data, bytes->data(), size);
    } else if (line.in.contains("sha256")) {
      const std::string got = calrt::validate::sha256_hex(std::span(data, size));
      if (!line.in["sha256"].is_string()) {
        bad(line.number, "in.sha256", "not a string");
      }
      if (got != line.in["sha256"].get<std::string>()) {
        diverge(line, "output sha256", line.in["sha256"].get<std::string>(), got);
      }
    }
  }

  // Devices the recording left open (a run that was killed) are closed here.
  void cleanup() {
    for (CalrtDevice* device : live_devices_) {
      auto a = calrt::detail::make_args<Calrt_Device_Destroy_Args>();
      a.device = device;
      api_.discard(table_.Device_Destroy(&a));
    }
  }

  const calrt::Api& api_;
  const CalrtApi& table_;
  std::filesystem::path file_;
  std::optional<std::filesystem::path> calbin_;
  const CalrtClockExtension* clock_ = nullptr;
  const CalrtTraceExtension* trace_ = nullptr;
  const CalrtFaultExtension* fault_ = nullptr;
  const CalrtDiagExtension* diag_ = nullptr;
  std::set<std::string> defined_;
  std::map<std::string, void*> handles_;
  std::map<std::pair<CalrtBuffer*, uint32_t>, std::pair<unsigned char*, uint64_t>> mappings_;
  std::set<CalrtDevice*> live_devices_;
  ReplayResult result_;
};

}  // namespace

ReplayResult replay_recording(const calrt::Api& api, const std::filesystem::path& file,
                              const std::optional<std::filesystem::path>& calbin) {
  return Replayer(api, file, calbin).run();
}

std::string describe(const Divergence& d) {
  return "seq " + std::to_string(d.seq) + " " + d.call + ": " + d.what + ": expected " +
         d.expected + ", got " + d.got;
}

int run_replay(const ReplayOptions& options) {
  const Stopwatch watch;
  ReplayResult result;
  try {
    const DeviceSpec spec = parse_device(options.device);
    const calrt::Api api = open_runtime(spec);
    result = replay_recording(api, options.file, options.calbin);
  } catch (const ReplayInputError& error) {
    std::fprintf(stderr, "calrt replay: %s\n", error.what());
    return kExitUsage;
  } catch (const std::invalid_argument& error) {
    std::fprintf(stderr, "calrt replay: %s\n", error.what());
    return kExitUsage;
  } catch (const calrt::LoadError& error) {
    std::fprintf(stderr, "calrt replay: %s\n", error.what());
    return kExitUsage;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "calrt replay: %s\n", error.what());
    return kExitFail;
  }
  for (const Divergence& d : result.divergences) {
    std::printf("%s\n", describe(d).c_str());
  }
  const double wall_ms = watch.elapsed_ms();
  if (result.divergences.empty()) {
    std::printf("replayed %llu calls: identical\n", static_cast<unsigned long long>(result.calls));
  } else {
    std::printf("replayed %llu calls: %zu divergence%s\n",
                static_cast<unsigned long long>(result.calls), result.divergences.size(),
                result.divergences.size() == 1 ? "" : "s");
  }
  if (options.json) {
    // A call passes when the runtime answered it as recorded.
    std::set<uint64_t> diverged;
    for (const Divergence& d : result.divergences) diverged.insert(d.seq);
    json doc = to_json(Envelope{
        .schema = "calrt-replay/1",
        .command = "replay",
        .result = result.divergences.empty() ? Verdict::pass : Verdict::fail,
        .counts = {.unit = "call",
                   .passed = result.calls - std::min<uint64_t>(result.calls, diverged.size()),
                   .failed = diverged.size(),
                   .skipped = result.skipped}});
    doc.update({{"file", options.file.string()},
                {"device", options.device},
                {"calls", result.calls},
                {"skipped_refused", result.skipped},
                {"wall_ms", wall_ms},
                {"divergences", json::array()}});
    for (const Divergence& d : result.divergences) {
      doc["divergences"].push_back({{"seq", d.seq},
                                    {"call", d.call},
                                    {"what", d.what},
                                    {"expected", d.expected},
                                    {"got", d.got}});
    }
    if (const std::string error = write_json_file(*options.json, doc); !error.empty()) {
      std::fprintf(stderr, "calrt replay: %s\n", error.c_str());
      return kExitUsage;
    }
  }
  return result.divergences.empty() ? kExitPass : kExitFail;
}

}  // namespace runner
