// Replay of a calrt-calls/1 recording. Calls go through the raw C table, not calrt.hpp, so
// that struct sizes, enum values and handles (forged or released ones included) reach the
// runtime exactly as they were recorded.
#include "runner/tools/replay.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

#include "abi/call_table.hpp"
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
          result_.cut_line = number;
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
  // Each call is decoded field by field as the call table lists them; what a call needs
  // beyond its fields is a hook below: before() and after() it runs, decode_memory() for a
  // pointer into the caller's memory.

  // What the args of one call point into while it runs.
  struct Scratch {
    std::deque<std::string> strings;
    std::vector<unsigned char> room;
  };

  template <class Table>
  const Table* table_of() const {
    if constexpr (std::is_same_v<Table, CalrtApi>) {
      return &table_;
    } else if constexpr (std::is_same_v<Table, CalrtClockExtension>) {
      return clock_;
    } else if constexpr (std::is_same_v<Table, CalrtTraceExtension>) {
      return trace_;
    } else if constexpr (std::is_same_v<Table, CalrtFaultExtension>) {
      return fault_;
    } else {
      static_assert(std::is_same_v<Table, CalrtDiagExtension>, "an extension replay knows");
      return diag_;
    }
  }

  // The replay runtime's entry of Args, or a bad recording when it lacks it.
  template <class Args>
  auto* entry(const Line& line) const {
    using Info = calrt::calls::CallInfo<Args>;
    using Table = typename Info::Table;
    if constexpr (std::is_same_v<Table, CalrtApi>) {
      const auto* field = &(table_.*Info::entry);
      const auto offset = static_cast<size_t>(reinterpret_cast<const char*>(field) -
                                              reinterpret_cast<const char*>(&table_));
      if (offset + sizeof(*field) > table_.struct_size || *field == nullptr) {
        bad(line.number, "call", line.call + " is not implemented by the replay runtime");
      }
      return *field;
    } else {
      const Table* ext = table_of<Table>();
      if (ext == nullptr) {
        bad(line.number, "call", line.call + " needs an extension the replay runtime lacks");
      }
      return ext->*Info::entry;
    }
  }

  template <class Args>
  void decode_ins(const Line& line, Args& a, Scratch& scratch) const {
    using calrt::calls::Dir;
    using calrt::calls::Kind;
    calrt::calls::for_each_field<Args>([&](const auto& field) {
      using F = std::remove_cvref_t<decltype(field)>;
      using T = typename F::Type;
      if constexpr (F::dir == Dir::in) {
        T& value = F::get(a);
        if constexpr (F::kind == Kind::handle) {
          value = handle<std::remove_pointer_t<T>>(line, field.name);
        } else if constexpr (F::kind == Kind::enumeration) {
          const int raw = enum_value(line, field.name);
          std::memcpy(&value, &raw, sizeof raw);
        } else if constexpr (F::kind == Kind::integer) {
          if (!line.in.contains(field.name) && recorded_later(line.call, field.name)) {
            value = 0;
          } else if constexpr (sizeof(T) <= sizeof(uint32_t)) {
            value = u32(line, field.name);
          } else {
            value = u64(line, field.name);
          }
        } else if constexpr (F::kind == Kind::string) {
          const auto recorded = text(line, field.name);
          value = recorded ? scratch.strings.emplace_back(*recorded).c_str() : nullptr;
        } else if constexpr (F::kind == Kind::memory) {
          decode_memory(line, a, scratch);
        }
      }
    });
  }

  // An in field the layer began to record later than the call: a recording made before
  // lacks it, and it means 0 there.
  static bool recorded_later(const std::string& call, std::string_view field) {
    return call == "Kv_Apply" && field == "row";
  }

  // The out fields a replay compares: what any runtime must reproduce from the same calls
  // (a version string, a timestamp or a device address need not match).
  static bool compared(const std::string& call, std::string_view field) {
    static const std::set<std::pair<std::string_view, std::string_view>> kCompared = {
        {"Buffer_Map", "size_bytes"},   {"Buffer_GetCsr", "value"},   {"Job_Wait", "result"},
        {"Job_Wait", "state"},          {"Job_Status", "state"},      {"Job_Status", "code"},
        {"Kv_Info", "capacity_tokens"}, {"Kv_Info", "filled_tokens"}, {"Trace_Read", "count"}};
    return kCompared.count({call, field}) != 0;
  }

  template <class Args>
  void check_outs(const Line& line, const Args& a) {
    using calrt::calls::Dir;
    using calrt::calls::Kind;
    calrt::calls::for_each_field<Args>([&](const auto& field) {
      using F = std::remove_cvref_t<decltype(field)>;
      using T = typename F::Type;
      if constexpr (F::dir == Dir::out && F::kind == Kind::handle) {
        created(line, field.name, F::get(a));
      } else if constexpr (F::dir == Dir::out && F::kind == Kind::enumeration) {
        if (compared(line.call, field.name)) {
          int raw = 0;
          std::memcpy(&raw, &F::get(a), sizeof raw);
          if constexpr (std::is_same_v<T, CalrtJobState>) {
            compare(line, field.name, job_state_name(raw), &job_state_name);
          } else {
            compare(line, field.name, std::to_string(raw));
          }
        }
      } else if constexpr (F::dir == Dir::out && F::kind == Kind::integer) {
        if (compared(line.call, field.name)) {
          compare(line, field.name, std::to_string(F::get(a)));
        }
      }
    });
  }

  template <class Args>
  void replay_call(const Line& line) {
    using Info = calrt::calls::CallInfo<Args>;
    auto a = args<Args>(line, Info::struct_size);
    Scratch scratch;
    decode_ins(line, a, scratch);
    before(line, a);
    auto* call = entry<Args>(line);
    if (result(line, call(&a))) {
      check_outs(line, a);
      after(line, a);
    }
  }

  void replay(const Line& line) {
#define REPLAY_CALL(Group, Verb, snake)                      \
  if (line.call == #Group "_" #Verb) {                       \
    return replay_call<Calrt_##Group##_##Verb##_Args>(line); \
  }
    CALRT_CORE_CALLS(REPLAY_CALL)
    CALRT_EXT_CALLS(REPLAY_CALL)
#undef REPLAY_CALL
    bad(line.number, "call", "unknown call '" + line.call + "'");
  }

  // --- hooks ------------------------------------------------------------------------------
  // The bytes of `count` elements of `element` bytes each, both recorded, within the bound.
  size_t bounded(const Line& line, const char* count, const char* element) const {
    const uint64_t n = u64(line, count);
    const uint64_t size = u64(line, element);
    if (size != 0 && n > kMaxReplayBuffer / size) {
      bad(line.number, std::string("in.") + count,
          std::to_string(n) + " x " + std::to_string(size) + " bytes exceeds the replay's bound");
    }
    return static_cast<size_t>(n * size);
  }

  template <class Args>
  void decode_memory(const Line&, Args&, Scratch&) const {}
  void decode_memory(const Line& line, Calrt_Trace_Read_Args& a, Scratch& scratch) const {
    scratch.room.resize(bounded(line, "capacity", "event_struct_size"));
    a.events =
        scratch.room.empty() ? nullptr : reinterpret_cast<CalrtTraceEvent*>(scratch.room.data());
  }
  void decode_memory(const Line& line, Calrt_Fault_GetHits_Args& a, Scratch& scratch) const {
    scratch.room.resize(bounded(line, "capacity", "hit_struct_size"));
    a.hits = scratch.room.empty() ? nullptr : reinterpret_cast<CalrtFaultHit*>(scratch.room.data());
  }
  void decode_memory(const Line& line, Calrt_Diag_Report_Args& a, Scratch& scratch) const {
    const uint64_t capacity = u64(line, "capacity");
    if (capacity > kMaxReplayBuffer) {
      bad(line.number, "in.capacity", "exceeds the replay's bound");
    }
    scratch.room.resize(static_cast<size_t>(capacity));
    a.buffer = scratch.room.empty() ? nullptr : reinterpret_cast<char*>(scratch.room.data());
  }
  void decode_memory(const Line& line, Calrt_Fault_SetPlan_Args& a, Scratch& scratch) const {
    const auto plan = text(line, "plan");
    a.plan = plan ? scratch.strings.emplace_back(*plan).c_str() : nullptr;
  }

  template <class Args>
  void before(const Line&, Args&) {}
  void before(const Line&, Calrt_Calbin_Create_Args& a) {
    if (calbin_ && a.path != nullptr) {
      calbin_path_ = calbin_->string();
      a.path = calbin_path_.c_str();
    }
  }
  void before(const Line& line, Calrt_Buffer_Unmap_Args& a) {
    unmap_data(line, a.buffer, a.tensor_index);
  }
  void before(const Line& line, Calrt_Fault_SetPlan_Args& a) {
    if (a.plan != nullptr && a.plan_size > text(line, "plan")->size()) {
      bad(line.number, "in.plan_size", "larger than the recorded plan");
    }
  }

  template <class Args>
  void after(const Line&, const Args&) {}
  void after(const Line&, const Calrt_Device_Create_Args& a) { live_devices_.insert(a.device); }
  void after(const Line&, const Calrt_Device_Destroy_Args& a) { live_devices_.erase(a.device); }
  void after(const Line&, const Calrt_Buffer_Map_Args& a) {
    mappings_[{a.buffer, a.tensor_index}] = {static_cast<unsigned char*>(a.data), a.size_bytes};
  }
  void after(const Line&, const Calrt_Buffer_Unmap_Args& a) {
    mappings_.erase({a.buffer, a.tensor_index});
  }

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
  std::string calbin_path_;  // --calbin, where Calbin_Create reads it
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
  std::string cut;
  if (result.cut_line != 0) {
    cut = options.file.string() + ":" + std::to_string(result.cut_line) +
          ": the last line is cut short (the recording stopped mid-write); the calls before it "
          "were replayed, what came after was not recorded";
    std::fprintf(stderr, "calrt replay: warning: %s\n", cut.c_str());
  }
  if (result.divergences.empty()) {
    std::printf("replayed %llu calls: identical%s\n", static_cast<unsigned long long>(result.calls),
                cut.empty() ? "" : " up to the cut line");
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
    if (!cut.empty()) doc["warnings"] = json::array({cut});
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
