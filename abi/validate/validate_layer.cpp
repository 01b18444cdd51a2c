// The validation layer: one LayerImpl per wrapped runtime, reached from its C table through
// trampolines bound to a slot index (a C function pointer carries no user data, and
// Device_Create has no handle to find the layer by).
#include "abi/validate/validate_layer.hpp"

#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.h"
#include "abi/runtime_table.hpp"
#include "abi/validate/codec.hpp"

namespace calrt::validate {
namespace {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------
// The layer's own error objects: every error a caller gets from the layer is one of these,
// whether the layer made it or converted the wrapped runtime's, so the layer's Error_*
// entries can read and release all of them.
// ---------------------------------------------------------------------------------------
struct LayerError {
  CalrtCode code;
  std::string message;
};

CalrtError* make_error(CalrtCode code, std::string message) {
  return reinterpret_cast<CalrtError*>(new LayerError{code, std::move(message)});
}

const LayerError* as_layer_error(const CalrtError* error) {
  return reinterpret_cast<const LayerError*>(error);
}

void error_destroy(Calrt_Error_Destroy_Args* args) {
  if (args != nullptr && args->struct_size >= CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE) {
    delete reinterpret_cast<LayerError*>(args->error);
  }
}

void error_message(Calrt_Error_Message_Args* args) {
  if (args == nullptr || args->struct_size < CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE ||
      args->error == nullptr) {
    return;
  }
  const LayerError* error = as_layer_error(args->error);
  args->message = error->message.c_str();
  args->message_size = error->message.size();
}

void error_get_code(Calrt_Error_GetCode_Args* args) {
  if (args == nullptr || args->struct_size < CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE ||
      args->error == nullptr) {
    return;
  }
  args->code = as_layer_error(args->error)->code;
}

template <class Args>
Args make_args(size_t struct_size) {
  Args args{};
  args.struct_size = struct_size;
  return args;
}

template <class Args>
bool covers(const Args* args, size_t size) {
  return args != nullptr && args->struct_size >= size;
}

// The integer in an enum field the caller filled: out-of-range values must not be loaded as
// the enum type.
template <class E>
int64_t raw_enum(const E& field) {
  std::underlying_type_t<E> value;
  std::memcpy(&value, &field, sizeof(value));
  return static_cast<int64_t>(value);
}

// Whether a table has entry `Name`: inside its struct_size and non-NULL.
#define VALIDATE_HAS(table, Name) \
  (offsetof(CalrtApi, Name) + sizeof(void*) <= (table)->struct_size && (table)->Name != nullptr)

// Every fallible entry of the table, and of the extensions the layer knows, from the call
// table (abi/call_table.hpp): X(Group, Verb, snake name).
#define VALIDATE_FOR_EACH_ENTRY(X) CALRT_CORE_CALLS(X)
#define VALIDATE_FOR_EACH_EXT_ENTRY(X) CALRT_EXT_CALLS(X)

// ---------------------------------------------------------------------------------------
// The recorder: one JSON object per line, flushed per line, one mutex.
// ---------------------------------------------------------------------------------------
class Recorder {
 public:
  Recorder(const std::string& path, const CalrtApi& inner, const std::string& inner_name) {
    file_ = std::fopen(path.c_str(), "w");
    if (file_ == nullptr) {
      throw std::runtime_error("validate: cannot create the recording " + path + ": " +
                               std::strerror(errno));
    }
    json header = {
        {"schema", kRecordSchema},
        {"abi",
         {{"major", inner.abi_major}, {"minor", inner.abi_minor}, {"patch", inner.abi_patch}}},
        {"runtime", inner_name}};
    write(header);
  }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;
  ~Recorder() { std::fclose(file_); }

  uint64_t begin() {
    const std::lock_guard lock(mutex_);
    return next_seq_++;
  }
  void write(const json& line) {
    const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    const std::lock_guard lock(mutex_);
    std::fwrite(text.data(), 1, text.size(), file_);
    // A hang or a kill must leave every call made so far in the file.
    std::fflush(file_);
  }
  uint64_t calls() const {
    const std::lock_guard lock(mutex_);
    return next_seq_;
  }

 private:
  mutable std::mutex mutex_;
  std::FILE* file_ = nullptr;
  uint64_t next_seq_ = 0;
};

// One call on its way through the layer: what gets recorded.
struct Call {
  uint64_t seq = 0;
  const char* name = "";
  json in = json::object();
  json out = json::object();
  json violations = json::array();
};

// ---------------------------------------------------------------------------------------
// Side tables, keyed by handle value.
// ---------------------------------------------------------------------------------------
struct Mapping {
  unsigned char* data = nullptr;
  uint64_t size = 0;
};

struct ModelCsrs {
  std::optional<uint32_t> past;  // index of past_kv_cur_seq_len
  std::optional<uint32_t> cur;   // index of cur_seq_len
  // A decode of a calbin with batch > 1: cur_seq_len counts rows and each row's past is its
  // position (calrt.h, Kv_Apply), so the sequence checks of one KV do not apply.
  bool batch_rows = false;
};

struct CalbinState {
  CalrtDevice* device = nullptr;
  std::optional<uint32_t> context;
  std::map<std::string, ModelCsrs> models;
};

struct BufferState {
  CalrtCalbin* calbin = nullptr;
  std::string model;
  bool input = false;
  CalrtKv* kv = nullptr;
  std::map<uint32_t, uint64_t> csr;
  std::map<uint32_t, Mapping> mapped;
  std::map<uint32_t, Mapping> stale;  // unmapped, but the pointer may still be written
  CalrtJob* owner = nullptr;          // the in-flight job that owns it
};

struct KvState {
  CalrtCalbin* calbin = nullptr;
  uint64_t capacity = 0;
  uint64_t written = 0;
  CalrtJob* user = nullptr;  // the in-flight job that writes it
};

struct Snapshot {
  CalrtBuffer* buffer = nullptr;
  uint32_t tensor = 0;
  Mapping mapping;
  std::vector<unsigned char> bytes;
};

struct JobState {
  CalrtCalbin* calbin = nullptr;
  CalrtBuffer* input = nullptr;
  CalrtBuffer* output = nullptr;
  CalrtKv* kv = nullptr;
  bool in_flight = false;
  std::optional<uint64_t> seq_end;  // positions written once the job completes
  std::vector<Snapshot> snapshots;
};

// Symbolic ids ("buffer#3") in creation order per kind; released handles keep theirs so a
// use after release is recorded with the id the caller knew.
class Ids {
 public:
  std::string create(const char* kind, const void* handle) {
    std::string id = std::string(kind) + "#" + std::to_string(++counters_[kind]);
    released_.erase(handle);
    live_[handle] = id;
    return id;
  }
  void release(const void* handle) {
    auto it = live_.find(handle);
    if (it != live_.end()) {
      released_[handle] = it->second;
      live_.erase(it);
    }
  }
  json get(const char* kind, const void* handle) const {
    if (handle == nullptr) {
      return nullptr;
    }
    if (auto it = live_.find(handle); it != live_.end()) {
      return it->second;
    }
    if (auto it = released_.find(handle); it != released_.end()) {
      return it->second;
    }
    return std::string(kind) + "?";  // never issued (or another layer's): no raw pointer
  }
  std::string name(const char* kind, const void* handle) const {
    const json id = get(kind, handle);
    return id.is_null() ? "NULL" : id.get<std::string>();
  }

 private:
  std::map<std::string, uint64_t> counters_;
  std::unordered_map<const void*, std::string> live_;
  std::unordered_map<const void*, std::string> released_;
};

class LayerImpl;
std::array<std::atomic<LayerImpl*>, kMaxLayers> g_slots{};

template <class Args>
using Entry = CalrtError*(Args*);

class LayerImpl final : public Layer {
 public:
  LayerImpl(const CalrtApi* inner, Options options, std::shared_ptr<const void> keepalive,
            int slot);
  ~LayerImpl() override;

  const CalrtApi* api() const override { return &table_; }
  std::vector<Violation> violations() const override {
    const std::lock_guard lock(mutex_);
    return violations_;
  }
  uint64_t recorded_calls() const override { return recorder_ ? recorder_->calls() : 0; }

#define VALIDATE_DECLARE(Group, Verb, fn) \
  CalrtError* Group##_##Verb(Calrt_##Group##_##Verb##_Args* args);
  VALIDATE_FOR_EACH_ENTRY(VALIDATE_DECLARE)
  VALIDATE_FOR_EACH_EXT_ENTRY(VALIDATE_DECLARE)
#undef VALIDATE_DECLARE

 private:
  template <int S>
  friend void fill_slot(LayerImpl& layer);

  // Converts an error of the wrapped runtime into the layer's own.
  CalrtError* adopt(CalrtError* error) const;
  // The wrapped runtime's table (CalrtApi or one of its extensions) of a call.
  template <class Table>
  const Table* inner_table() const;
  // Calls the wrapped runtime's entry of Args; its error is adopted.
  template <class Args>
  CalrtError* call_inner(Args* args) const;
  // A call with nothing to check: recorded and forwarded.
  template <class Args>
  CalrtError* pass_through(Args* args);
  // Records the call's in fields; with mutex_ held (handles are recorded by their ids).
  template <class Args>
  void record_ins(Call& call, const Args& args) const;
  // Records the out fields of a call that succeeded, giving each handle it created its id;
  // with mutex_ held.
  template <class Args>
  void record_outs(Call& call, const Args& args);
  Call begin(const char* name, size_t struct_size, size_t expected) const;
  CalrtError* finish(Call& call, CalrtError* error) const;
  // Logs and keeps a violation; returns the error to answer with when refusing.
  CalrtError* violate(Call& call, const char* id, CalrtCode code, const std::string& detail,
                      bool refusable);
  bool refuse() const { return options_.refuse; }
  // A job was submitted: it owns its buffers and the KV applied to its input until final.
  void job_submitted(const Calrt_Job_Submit_Args& args, CalrtKv* kv,
                     std::optional<uint64_t> seq_end);
  // The job reached a final state (observed by the caller); `completed` advances its KV.
  void job_final(Call& call, CalrtJob* job, bool completed);
  std::optional<CalrtJobState> inner_job_state(CalrtJob* job) const;
  ModelCsrs model_csrs(CalrtCalbin* calbin, const std::string& model);
  std::optional<uint32_t> calbin_context(CalrtCalbin* calbin);
  // Whether `model` is the decode of a calbin with batch > 1 (asks the inner runtime).
  bool is_batch_decode(CalrtCalbin* calbin, const std::string& model);
  void forget_calbin_children(CalrtCalbin* calbin);
  // Drops every pointer the layer keeps into the storage of the buffers `doomed` selects
  // (their stale mappings and the in-flight jobs' snapshots of them). Called with mutex_
  // held, before the inner runtime frees that storage: job_final and Job_Submit read those
  // pointers under mutex_, so once this returns no other thread can touch the storage.
  template <class Doomed>
  void drop_host_views(Doomed doomed);

  const CalrtApi* inner_;
  Options options_;
  std::shared_ptr<const void> keepalive_;
  int slot_;
  CalrtApi table_{};
  CalrtClockExtension clock_{};
  CalrtTraceExtension trace_{};
  CalrtFaultExtension fault_{};
  CalrtDiagExtension diag_{};
  const CalrtClockExtension* inner_clock_ = nullptr;
  const CalrtTraceExtension* inner_trace_ = nullptr;
  const CalrtFaultExtension* inner_fault_ = nullptr;
  const CalrtDiagExtension* inner_diag_ = nullptr;
  std::unique_ptr<Recorder> recorder_;

  mutable std::mutex mutex_;  // the side tables, ids and violations
  Ids ids_;
  std::unordered_map<CalrtDevice*, bool> devices_;
  std::unordered_map<CalrtCalbin*, CalbinState> calbins_;
  std::unordered_map<CalrtBuffer*, BufferState> buffers_;
  std::unordered_map<CalrtKv*, KvState> kvs_;
  std::set<CalrtKv*> freed_kvs_;
  std::unordered_map<CalrtJob*, JobState> jobs_;
  std::vector<Violation> violations_;
};

// Trampolines of slot S: each C entry finds its layer through the slot.
template <int S>
struct Trampolines {
#define VALIDATE_TRAMPOLINE(Group, Verb, fn)                                 \
  static CalrtError* Group##_##Verb(Calrt_##Group##_##Verb##_Args* args) {   \
    return g_slots[S].load(std::memory_order_acquire)->Group##_##Verb(args); \
  }
  VALIDATE_FOR_EACH_ENTRY(VALIDATE_TRAMPOLINE)
  VALIDATE_FOR_EACH_EXT_ENTRY(VALIDATE_TRAMPOLINE)
#undef VALIDATE_TRAMPOLINE
};

template <int S>
void fill_slot(LayerImpl& layer) {
#define VALIDATE_FILL(Group, Verb, fn) \
  layer.table_.Group##_##Verb =        \
      VALIDATE_HAS(layer.inner_, Group##_##Verb) ? &Trampolines<S>::Group##_##Verb : nullptr;
  VALIDATE_FOR_EACH_ENTRY(VALIDATE_FILL)
#undef VALIDATE_FILL
#define VALIDATE_FILL_EXT(ext, Name) \
  layer.ext##_.Name = layer.inner_##ext##_->Name != nullptr ? &Trampolines<S>::Name : nullptr;
  if (layer.inner_clock_ != nullptr) {
    VALIDATE_FILL_EXT(clock, Clock_Get)
    VALIDATE_FILL_EXT(clock, Clock_HostSpend)
  }
  if (layer.inner_trace_ != nullptr) {
    VALIDATE_FILL_EXT(trace, Trace_Enable)
    VALIDATE_FILL_EXT(trace, Trace_Read)
  }
  if (layer.inner_fault_ != nullptr) {
    VALIDATE_FILL_EXT(fault, Fault_SetPlan)
    VALIDATE_FILL_EXT(fault, Fault_GetHits)
  }
  if (layer.inner_diag_ != nullptr) {
    VALIDATE_FILL_EXT(diag, Diag_Report)
    VALIDATE_FILL_EXT(diag, Diag_StateHash)
  }
#undef VALIDATE_FILL_EXT
}

template <int... S>
constexpr auto make_fillers(std::integer_sequence<int, S...>) {
  return std::array<void (*)(LayerImpl&), sizeof...(S)>{&fill_slot<S>...};
}

constexpr auto kFillers = make_fillers(std::make_integer_sequence<int, kMaxLayers>{});

LayerImpl::LayerImpl(const CalrtApi* inner, Options options, std::shared_ptr<const void> keepalive,
                     int slot)
    : inner_(inner), options_(std::move(options)), keepalive_(std::move(keepalive)), slot_(slot) {
  table_.struct_size = CALRT_API_STRUCT_SIZE;
  table_.abi_major = inner->abi_major;
  table_.abi_minor = inner->abi_minor;
  table_.abi_patch = inner->abi_patch;
  table_.Error_Destroy = &error_destroy;
  table_.Error_Message = &error_message;
  table_.Error_GetCode = &error_get_code;
  // The known extensions are wrapped (their errors must become the layer's, and a fault plan
  // must be recorded for a replay to re-apply it); others are dropped, since errors they
  // return could not be released through the layer's Error_Destroy.
  for (auto* ext = static_cast<const CalrtExtensionBase*>(inner->extension); ext != nullptr;
       ext = ext->next) {
    if (ext->type == CALRT_EXT_CLOCK && ext->struct_size >= CALRT_CLOCK_EXTENSION_STRUCT_SIZE) {
      inner_clock_ = reinterpret_cast<const CalrtClockExtension*>(ext);
    } else if (ext->type == CALRT_EXT_TRACE &&
               ext->struct_size >= CALRT_TRACE_EXTENSION_STRUCT_SIZE) {
      inner_trace_ = reinterpret_cast<const CalrtTraceExtension*>(ext);
    } else if (ext->type == CALRT_EXT_FAULT &&
               ext->struct_size >= CALRT_FAULT_EXTENSION_STRUCT_SIZE) {
      inner_fault_ = reinterpret_cast<const CalrtFaultExtension*>(ext);
    } else if (ext->type == CALRT_EXT_DIAG &&
               ext->struct_size >= CALRT_DIAG_EXTENSION_STRUCT_SIZE) {
      inner_diag_ = reinterpret_cast<const CalrtDiagExtension*>(ext);
    }
  }
  const CalrtExtensionBase* chain = nullptr;
  auto link = [&chain](CalrtExtensionBase& base, size_t size, CalrtExtensionType type) {
    base.struct_size = size;
    base.type = type;
    base.next = chain;
    chain = &base;
  };
  if (inner_diag_ != nullptr) {
    link(diag_.base, sizeof(diag_), CALRT_EXT_DIAG);
  }
  if (inner_fault_ != nullptr) {
    link(fault_.base, sizeof(fault_), CALRT_EXT_FAULT);
  }
  if (inner_trace_ != nullptr) {
    link(trace_.base, sizeof(trace_), CALRT_EXT_TRACE);
  }
  if (inner_clock_ != nullptr) {
    link(clock_.base, sizeof(clock_), CALRT_EXT_CLOCK);
  }
  table_.extension = const_cast<CalrtExtensionBase*>(chain);
  kFillers[static_cast<size_t>(slot)](*this);
  if (!options_.record_path.empty()) {
    recorder_ = std::make_unique<Recorder>(options_.record_path, *inner, options_.inner_name);
  }
}

LayerImpl::~LayerImpl() {
  g_slots[static_cast<size_t>(slot_)].store(nullptr, std::memory_order_release);
  if (!violations_.empty()) {
    spdlog::warn("validate: {} violation(s) over the layer's life", violations_.size());
  }
}

CalrtError* LayerImpl::adopt(CalrtError* error) const {
  if (error == nullptr) {
    return nullptr;
  }
  auto code_args = make_args<Calrt_Error_GetCode_Args>(CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE);
  code_args.error = error;
  inner_->Error_GetCode(&code_args);
  auto message_args = make_args<Calrt_Error_Message_Args>(CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE);
  message_args.error = error;
  inner_->Error_Message(&message_args);
  std::string message = message_args.message != nullptr
                            ? std::string(message_args.message, message_args.message_size)
                            : std::string();
  auto destroy_args = make_args<Calrt_Error_Destroy_Args>(CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE);
  destroy_args.error = error;
  inner_->Error_Destroy(&destroy_args);
  return make_error(code_args.code, std::move(message));
}

Call LayerImpl::begin(const char* name, size_t struct_size, size_t expected) const {
  Call call;
  call.name = name;
  if (recorder_) {
    call.seq = recorder_->begin();
    if (struct_size != expected) {
      call.in["struct_size"] = struct_size;
    }
  }
  return call;
}

CalrtError* LayerImpl::finish(Call& call, CalrtError* error) const {
  if (recorder_) {
    json line = {{"seq", call.seq}, {"call", call.name}, {"in", call.in}};
    const CalrtCode code = error != nullptr ? as_layer_error(error)->code : CALRT_OK;
    if (error == nullptr) {
      line["out"] = call.out;
    }
    line["code"] = static_cast<uint32_t>(code);
    line["code_name"] = calrt::code_name(code);
    if (error != nullptr) {
      line["message"] = as_layer_error(error)->message;
    }
    if (!call.violations.empty()) {
      line["violations"] = call.violations;
    }
    recorder_->write(line);
  }
  return error;
}

CalrtError* LayerImpl::violate(Call& call, const char* id, CalrtCode code,
                               const std::string& detail, bool refusable) {
  const bool refused = refusable && refuse();
  std::string message = std::string("validate: ") + id + ": " + detail;
  spdlog::warn("{}{}", message, refused ? " (refused)" : "");
  call.violations.push_back({{"id", id}, {"message", message}, {"refused", refused}});
  violations_.push_back({id, call.name, message, refused});
  return refused ? make_error(code, std::move(message)) : nullptr;
}

std::optional<CalrtJobState> LayerImpl::inner_job_state(CalrtJob* job) const {
  if (!VALIDATE_HAS(inner_, Job_Status)) {
    return std::nullopt;
  }
  auto args = make_args<Calrt_Job_Status_Args>(CALRT_JOB_STATUS_ARGS_STRUCT_SIZE);
  args.job = job;
  if (CalrtError* error = inner_->Job_Status(&args)) {
    delete as_layer_error(adopt(error));
    return std::nullopt;
  }
  return args.state;
}

// Called with mutex_ held.
void LayerImpl::job_final(Call& call, CalrtJob* job, bool completed) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.in_flight) {
    return;
  }
  JobState& state = it->second;
  state.in_flight = false;
  for (CalrtBuffer* buffer : {state.input, state.output}) {
    if (auto b = buffers_.find(buffer); b != buffers_.end() && b->second.owner == job) {
      b->second.owner = nullptr;
    }
  }
  if (auto k = kvs_.find(state.kv); k != kvs_.end() && k->second.user == job) {
    k->second.user = nullptr;
    if (completed && state.seq_end) {
      k->second.written = *state.seq_end;
    }
  }
  for (const Snapshot& snapshot : state.snapshots) {
    if (buffers_.find(snapshot.buffer) == buffers_.end()) {
      continue;
    }
    const unsigned char* now = snapshot.mapping.data;
    for (size_t i = 0; i < snapshot.bytes.size(); ++i) {
      if (now[i] != snapshot.bytes[i]) {
        violate(call, "WRITE.after-unmap", CALRT_BUFFER_REUSE,
                "the host wrote tensor " + std::to_string(snapshot.tensor) + " of " +
                    ids_.name("buffer", snapshot.buffer) +
                    " through a mapping kept past Buffer_Unmap while " + ids_.name("job", job) +
                    " owned it (first changed byte at offset " + std::to_string(i) +
                    "); the job's result cannot be trusted",
                false);
        break;
      }
    }
  }
  state.snapshots.clear();
}

ModelCsrs LayerImpl::model_csrs(CalrtCalbin* calbin, const std::string& model) {
  {
    const std::lock_guard lock(mutex_);
    auto it = calbins_.find(calbin);
    if (it == calbins_.end()) {
      return {};
    }
    if (auto m = it->second.models.find(model); m != it->second.models.end()) {
      return m->second;
    }
  }
  ModelCsrs found;
  if (VALIDATE_HAS(inner_, Calbin_GetCsr)) {
    // CSR indices come from their names: the layer never assumes an order.
    for (uint32_t index = 0; index < 4096; ++index) {
      auto args = make_args<Calrt_Calbin_GetCsr_Args>(CALRT_CALBIN_GETCSR_ARGS_STRUCT_SIZE);
      args.calbin = calbin;
      args.model_name = model.c_str();
      args.index = index;
      if (CalrtError* error = inner_->Calbin_GetCsr(&args)) {
        delete as_layer_error(adopt(error));
        break;
      }
      const std::string name = args.name != nullptr ? args.name : "";
      if (name == "past_kv_cur_seq_len") {
        found.past = index;
      } else if (name == "cur_seq_len") {
        found.cur = index;
      }
    }
  }
  found.batch_rows = is_batch_decode(calbin, model);
  const std::lock_guard lock(mutex_);
  if (auto it = calbins_.find(calbin); it != calbins_.end()) {
    it->second.models[model] = found;
  }
  return found;
}

bool LayerImpl::is_batch_decode(CalrtCalbin* calbin, const std::string& model) {
  if (!VALIDATE_HAS(inner_, Calbin_GetInfo) || !VALIDATE_HAS(inner_, Calbin_GetModel)) {
    return false;
  }
  auto info = make_args<Calrt_Calbin_GetInfo_Args>(CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE);
  info.calbin = calbin;
  if (CalrtError* error = inner_->Calbin_GetInfo(&info)) {
    delete as_layer_error(adopt(error));
    return false;
  }
  for (uint32_t index = 0; info.batch > 1 && index < info.model_count; ++index) {
    auto args = make_args<Calrt_Calbin_GetModel_Args>(CALRT_CALBIN_GETMODEL_ARGS_STRUCT_SIZE);
    args.calbin = calbin;
    args.model_index = index;
    if (CalrtError* error = inner_->Calbin_GetModel(&args)) {
      delete as_layer_error(adopt(error));
      return false;
    }
    if (args.name != nullptr && model == args.name) return args.type == CALRT_MODEL_DECODE;
  }
  return false;
}

std::optional<uint32_t> LayerImpl::calbin_context(CalrtCalbin* calbin) {
  {
    const std::lock_guard lock(mutex_);
    auto it = calbins_.find(calbin);
    if (it == calbins_.end()) {
      return std::nullopt;
    }
    if (it->second.context) {
      return it->second.context;
    }
  }
  if (!VALIDATE_HAS(inner_, Calbin_GetInfo)) {
    return std::nullopt;
  }
  auto args = make_args<Calrt_Calbin_GetInfo_Args>(CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE);
  args.calbin = calbin;
  if (CalrtError* error = inner_->Calbin_GetInfo(&args)) {
    delete as_layer_error(adopt(error));
    return std::nullopt;
  }
  const std::lock_guard lock(mutex_);
  if (auto it = calbins_.find(calbin); it != calbins_.end()) {
    it->second.context = args.context;
  }
  return args.context;
}

// Called with mutex_ held: the calbin's buffers, KV handles and jobs are gone with it.
template <class Doomed>
void LayerImpl::drop_host_views(Doomed doomed) {
  for (auto& [buffer, state] : buffers_) {
    if (doomed(buffer, state)) {
      state.stale.clear();
    }
  }
  for (auto& [job, state] : jobs_) {
    std::erase_if(state.snapshots, [&](const Snapshot& snapshot) {
      auto b = buffers_.find(snapshot.buffer);
      return b == buffers_.end() || doomed(b->first, b->second);
    });
  }
}

void LayerImpl::forget_calbin_children(CalrtCalbin* calbin) {
  for (auto it = buffers_.begin(); it != buffers_.end();) {
    if (it->second.calbin == calbin) {
      ids_.release(it->first);
      it = buffers_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = kvs_.begin(); it != kvs_.end();) {
    if (it->second.calbin == calbin) {
      ids_.release(it->first);
      it = kvs_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->second.calbin == calbin) {
      ids_.release(it->first);
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
}

// ---------------------------------------------------------------------------------------
// What the recording writes of a call's fields (README.md, "The recording"), from the call
// table: handles as their symbolic ids, enums as their integers, strings as text (an in
// string may be null, an out string is "" when the runtime left it NULL), arrays in full.
// Memory fields carry pointers, which are never written; record_memory() writes what one
// means where that is worth replaying.
// ---------------------------------------------------------------------------------------
using calrt::calls::Dir;
using calrt::calls::Kind;

template <class Args>
void record_memory(json&, const Args&) {}
void record_memory(json& in, const Calrt_Fault_SetPlan_Args& args) {
  in["plan"] = args.plan != nullptr ? json(std::string(args.plan, args.plan_size)) : json(nullptr);
}

template <class T>
json field_json(const T& value) {
  if constexpr (std::is_enum_v<T>) {
    return raw_enum(value);
  } else if constexpr (std::is_array_v<T>) {
    json values = json::array();
    for (const auto& element : value) {
      values.push_back(element);
    }
    return values;
  } else {
    return value;
  }
}

template <class Table>
const Table* LayerImpl::inner_table() const {
  if constexpr (std::is_same_v<Table, CalrtApi>) {
    return inner_;
  } else if constexpr (std::is_same_v<Table, CalrtClockExtension>) {
    return inner_clock_;
  } else if constexpr (std::is_same_v<Table, CalrtTraceExtension>) {
    return inner_trace_;
  } else if constexpr (std::is_same_v<Table, CalrtFaultExtension>) {
    return inner_fault_;
  } else {
    static_assert(std::is_same_v<Table, CalrtDiagExtension>, "an extension the layer wraps");
    return inner_diag_;
  }
}

template <class Args>
CalrtError* LayerImpl::call_inner(Args* args) const {
  using Info = calrt::calls::CallInfo<Args>;
  return adopt((inner_table<typename Info::Table>()->*Info::entry)(args));
}

template <class Args>
void LayerImpl::record_ins(Call& call, const Args& args) const {
  calrt::calls::for_each_field<Args>([&](const auto& field) {
    using F = std::remove_cvref_t<decltype(field)>;
    if constexpr (F::dir == Dir::in && F::kind != Kind::memory) {
      // A field beyond an older caller's struct_size means 0 (calrt.h's versioning rules).
      const typename F::Type value =
          field.covered_by(args.struct_size) ? F::get(args) : typename F::Type{};
      if constexpr (F::kind == Kind::handle) {
        call.in[field.name] = ids_.get(calrt::calls::kHandleName<typename F::Type>, value);
      } else if constexpr (F::kind == Kind::string) {
        call.in[field.name] = value != nullptr ? json(value) : json(nullptr);
      } else {
        call.in[field.name] = field_json(value);
      }
    }
  });
  record_memory(call.in, args);
}

template <class Args>
void LayerImpl::record_outs(Call& call, const Args& args) {
  calrt::calls::for_each_field<Args>([&](const auto& field) {
    using F = std::remove_cvref_t<decltype(field)>;
    if constexpr (F::dir == Dir::out && F::kind != Kind::memory) {
      if (!field.covered_by(args.struct_size)) {
        return;
      }
      const auto& value = F::get(args);
      if constexpr (F::kind == Kind::handle) {
        call.out[field.name] = ids_.create(calrt::calls::kHandleName<typename F::Type>, value);
      } else if constexpr (F::kind == Kind::string) {
        call.out[field.name] = value != nullptr ? value : "";
      } else {
        call.out[field.name] = field_json(value);
      }
    }
  });
}

template <class Args>
CalrtError* LayerImpl::pass_through(Args* args) {
  using Info = calrt::calls::CallInfo<Args>;
  Call call = begin(Info::name, args != nullptr ? args->struct_size : 0, Info::struct_size);
  if (!covers(args, Info::struct_size)) {
    return finish(call, call_inner(args));
  }
  {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
  }
  CalrtError* error = call_inner(args);
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    record_outs(call, *args);
  }
  return finish(call, error);
}

#define VALIDATE_BEGIN(Name, SIZE)                                         \
  Call call = begin(#Name, args != nullptr ? args->struct_size : 0, SIZE); \
  if (!covers(args, SIZE)) {                                               \
    return finish(call, adopt(inner_->Name(args)));                        \
  }

// ---------------------------------------------------------------------------------------
// Device.
// ---------------------------------------------------------------------------------------
CalrtError* LayerImpl::Device_Create(Calrt_Device_Create_Args* args) {
  VALIDATE_BEGIN(Device_Create, CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
  }
  CalrtError* error = adopt(inner_->Device_Create(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    devices_[args->device] = true;
    record_outs(call, *args);
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Device_Destroy(Calrt_Device_Destroy_Args* args) {
  VALIDATE_BEGIN(Device_Destroy, CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE)
  CalrtDevice* device = args->device;
  {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
    if (devices_.count(device) != 0) {
      // The leak check reports and never refuses: the device is closed either way.
      std::vector<std::string> kvs, buffers, calbins;
      for (const auto& [calbin, state] : calbins_) {
        if (state.device != device) {
          continue;
        }
        calbins.push_back(ids_.name("calbin", calbin));
        for (const auto& [kv, kv_state] : kvs_) {
          if (kv_state.calbin == calbin) {
            kvs.push_back(ids_.name("kv", kv));
          }
        }
        for (const auto& [buffer, buffer_state] : buffers_) {
          if (buffer_state.calbin == calbin) {
            buffers.push_back(ids_.name("buffer", buffer));
          }
        }
      }
      auto report = [&](const char* id, const char* what, const std::vector<std::string>& names) {
        if (names.empty()) {
          return;
        }
        std::string list;
        for (const std::string& name : names) {
          list += (list.empty() ? "" : ", ") + name;
        }
        violate(call, id, CALRT_WRONG_STATE,
                std::to_string(names.size()) + " " + what + " still live at Device_Destroy of " +
                    ids_.name("device", device) + ": " + list,
                false);
      };
      report("LEAK.kv", "KV handle(s)", kvs);
      report("LEAK.buffer", "buffer(s)", buffers);
      report("LEAK.calbin", "calbin(s)", calbins);
    }
    drop_host_views([&](CalrtBuffer*, const BufferState& buffer) {
      auto c = calbins_.find(buffer.calbin);
      return c != calbins_.end() && c->second.device == device;
    });
  }
  CalrtError* error = adopt(inner_->Device_Destroy(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    for (auto it = calbins_.begin(); it != calbins_.end();) {
      if (it->second.device == device) {
        forget_calbin_children(it->first);
        ids_.release(it->first);
        it = calbins_.erase(it);
      } else {
        ++it;
      }
    }
    devices_.erase(device);
    ids_.release(device);
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Device_Status(Calrt_Device_Status_Args* args) { return pass_through(args); }

CalrtError* LayerImpl::Device_ChipStatus(Calrt_Device_ChipStatus_Args* args) {
  return pass_through(args);
}

CalrtError* LayerImpl::Device_Reset(Calrt_Device_Reset_Args* args) {
  VALIDATE_BEGIN(Device_Reset, CALRT_DEVICE_RESET_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
  }
  CalrtError* error = adopt(inner_->Device_Reset(args));
  if (error == nullptr) {
    {
      const std::lock_guard lock(mutex_);
      record_outs(call, *args);
    }
    // Jobs in flight were cancelled (or had completed just before): ask which.
    std::vector<CalrtJob*> in_flight;
    {
      const std::lock_guard lock(mutex_);
      for (const auto& [job, state] : jobs_) {
        auto c = calbins_.find(state.calbin);
        if (state.in_flight && c != calbins_.end() && c->second.device == args->device) {
          in_flight.push_back(job);
        }
      }
    }
    std::vector<std::pair<CalrtJob*, bool>> ended;
    for (CalrtJob* job : in_flight) {
      const auto state = inner_job_state(job);
      ended.emplace_back(job, state && *state == CALRT_JOB_COMPLETED);
    }
    const std::lock_guard lock(mutex_);
    for (const auto& [job, completed] : ended) {
      job_final(call, job, completed);
    }
    if (raw_enum(args->level) >= CALRT_RESET_CHIP) {
      // KV contents are lost with the configuration: a sequence starts again at 0.
      for (auto& [kv, state] : kvs_) {
        auto c = calbins_.find(state.calbin);
        if (c != calbins_.end() && c->second.device == args->device) {
          state.written = 0;
        }
      }
    }
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Device_SetParallelMode(Calrt_Device_SetParallelMode_Args* args) {
  return pass_through(args);
}

// ---------------------------------------------------------------------------------------
// Calbin.
// ---------------------------------------------------------------------------------------
CalrtError* LayerImpl::Calbin_Create(Calrt_Calbin_Create_Args* args) {
  VALIDATE_BEGIN(Calbin_Create, CALRT_CALBIN_CREATE_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
  }
  CalrtError* error = adopt(inner_->Calbin_Create(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    calbins_[args->calbin] = CalbinState{args->device, std::nullopt, {}};
    record_outs(call, *args);
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Calbin_Destroy(Calrt_Calbin_Destroy_Args* args) {
  VALIDATE_BEGIN(Calbin_Destroy, CALRT_CALBIN_DESTROY_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
    drop_host_views(
        [&](CalrtBuffer*, const BufferState& buffer) { return buffer.calbin == args->calbin; });
  }
  CalrtError* error = adopt(inner_->Calbin_Destroy(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    forget_calbin_children(args->calbin);
    calbins_.erase(args->calbin);
    ids_.release(args->calbin);
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Calbin_GetInfo(Calrt_Calbin_GetInfo_Args* args) {
  return pass_through(args);
}

CalrtError* LayerImpl::Calbin_GetModel(Calrt_Calbin_GetModel_Args* args) {
  return pass_through(args);
}

CalrtError* LayerImpl::Calbin_GetTensor(Calrt_Calbin_GetTensor_Args* args) {
  return pass_through(args);
}

CalrtError* LayerImpl::Calbin_GetCsr(Calrt_Calbin_GetCsr_Args* args) { return pass_through(args); }

CalrtError* LayerImpl::Calbin_Configure(Calrt_Calbin_Configure_Args* args) {
  return pass_through(args);
}

// ---------------------------------------------------------------------------------------
// Buffers.
// ---------------------------------------------------------------------------------------
CalrtError* LayerImpl::Buffer_Create(Calrt_Buffer_Create_Args* args) {
  VALIDATE_BEGIN(Buffer_Create, CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
  }
  CalrtError* error = adopt(inner_->Buffer_Create(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    BufferState state;
    state.calbin = args->calbin;
    state.model = args->model_name != nullptr ? args->model_name : "";
    state.input = raw_enum(args->direction) == CALRT_INPUT;
    buffers_[args->buffer] = std::move(state);
    record_outs(call, *args);
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Buffer_Destroy(Calrt_Buffer_Destroy_Args* args) {
  VALIDATE_BEGIN(Buffer_Destroy, CALRT_BUFFER_DESTROY_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
    drop_host_views(
        [&](CalrtBuffer* buffer, const BufferState&) { return buffer == args->buffer; });
  }
  CalrtError* error = adopt(inner_->Buffer_Destroy(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    buffers_.erase(args->buffer);
    ids_.release(args->buffer);
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Buffer_Map(Calrt_Buffer_Map_Args* args) {
  VALIDATE_BEGIN(Buffer_Map, CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
    auto it = buffers_.find(args->buffer);
    if (it != buffers_.end() && it->second.owner != nullptr) {
      if (CalrtError* refused =
              violate(call, "MAP.in-flight", CALRT_BUSY,
                      "Buffer_Map of tensor " + std::to_string(args->tensor_index) + " of " +
                          ids_.name("buffer", args->buffer) + ", owned by in-flight " +
                          ids_.name("job", it->second.owner),
                      true)) {
        return finish(call, refused);
      }
    }
  }
  CalrtError* error = adopt(inner_->Buffer_Map(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    record_outs(call, *args);
    if (auto it = buffers_.find(args->buffer); it != buffers_.end()) {
      it->second.mapped[args->tensor_index] =
          Mapping{static_cast<unsigned char*>(args->data), args->size_bytes};
      it->second.stale.erase(args->tensor_index);
    }
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Buffer_Unmap(Calrt_Buffer_Unmap_Args* args) {
  VALIDATE_BEGIN(Buffer_Unmap, CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE)
  std::optional<Mapping> mapping;
  {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
    auto it = buffers_.find(args->buffer);
    if (it != buffers_.end()) {
      if (auto m = it->second.mapped.find(args->tensor_index); m != it->second.mapped.end()) {
        mapping = m->second;
        // The bytes as they cross the boundary: inputs in full (replayed), outputs by hash.
        if (recorder_ && m->second.data != nullptr) {
          const std::span<const unsigned char> bytes(m->second.data, m->second.size);
          if (it->second.input) {
            call.in["data"] = base64_encode(bytes);
          } else {
            call.in["sha256"] = sha256_hex(bytes);
          }
        }
      }
    }
  }
  CalrtError* error = adopt(inner_->Buffer_Unmap(args));
  if (error == nullptr && mapping) {
    const std::lock_guard lock(mutex_);
    if (auto it = buffers_.find(args->buffer); it != buffers_.end()) {
      it->second.mapped.erase(args->tensor_index);
      it->second.stale[args->tensor_index] = *mapping;
    }
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Buffer_SetCsr(Calrt_Buffer_SetCsr_Args* args) {
  VALIDATE_BEGIN(Buffer_SetCsr, CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
    auto it = buffers_.find(args->buffer);
    if (it != buffers_.end() && it->second.owner != nullptr) {
      if (CalrtError* refused =
              violate(call, "MAP.in-flight", CALRT_BUSY,
                      "Buffer_SetCsr of CSR " + std::to_string(args->csr_index) + " = " +
                          std::to_string(args->value) + " on " + ids_.name("buffer", args->buffer) +
                          ", owned by in-flight " + ids_.name("job", it->second.owner),
                      true)) {
        return finish(call, refused);
      }
    }
  }
  CalrtError* error = adopt(inner_->Buffer_SetCsr(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    if (auto it = buffers_.find(args->buffer); it != buffers_.end()) {
      it->second.csr[args->csr_index] = args->value;
    }
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Buffer_GetCsr(Calrt_Buffer_GetCsr_Args* args) { return pass_through(args); }

// ---------------------------------------------------------------------------------------
// Jobs.
// ---------------------------------------------------------------------------------------
CalrtError* LayerImpl::Job_Submit(Calrt_Job_Submit_Args* args) {
  VALIDATE_BEGIN(Job_Submit, CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE)
  const std::string model = args->model_name != nullptr ? args->model_name : "";
  // Inner lookups happen before the side tables are locked: they call the runtime.
  const ModelCsrs csrs = model_csrs(args->calbin, model);
  const std::optional<uint32_t> context = calbin_context(args->calbin);
  std::optional<uint64_t> seq_end;
  CalrtKv* kv = nullptr;
  {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
    auto in = buffers_.find(args->input);
    if (in != buffers_.end() && in->second.input && in->second.kv != nullptr && csrs.past &&
        csrs.cur && !csrs.batch_rows) {
      kv = in->second.kv;
      auto k = kvs_.find(kv);
      if (k != kvs_.end()) {
        const uint64_t past = in->second.csr.count(*csrs.past) ? in->second.csr[*csrs.past] : 0;
        const uint64_t cur = in->second.csr.count(*csrs.cur) ? in->second.csr[*csrs.cur] : 0;
        const uint64_t end = past + cur;
        const std::string where = ids_.name("kv", kv) + " applied to " +
                                  ids_.name("buffer", args->input) + " (model " + model + ")";
        CalrtError* refused = nullptr;
        if (end > k->second.capacity || (context && end > *context) || end < past) {
          refused = violate(call, "SEQ.capacity", CALRT_OUT_OF_RANGE,
                            "past_kv_cur_seq_len " + std::to_string(past) + " + cur_seq_len " +
                                std::to_string(cur) + " = " + std::to_string(end) +
                                " exceeds the capacity " + std::to_string(k->second.capacity) +
                                " of " + where +
                                (context ? " or the calbin's context " + std::to_string(*context)
                                         : std::string()),
                            true);
        } else if (past != k->second.written) {
          refused =
              violate(call, "SEQ.continuity", CALRT_OUT_OF_RANGE,
                      "past_kv_cur_seq_len " + std::to_string(past) + " but " +
                          std::to_string(k->second.written) + " tokens were written to " + where +
                          " (a sequence continues where it ended, or restarts at 0 "
                          "after Kv_Clear)",
                      true);
        }
        if (refused != nullptr) {
          return finish(call, refused);
        }
        seq_end = end;
      } else {
        kv = nullptr;
      }
    }
  }
  CalrtError* error = adopt(inner_->Job_Submit(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    record_outs(call, *args);
    job_submitted(*args, kv, seq_end);
  }
  return finish(call, error);
}

// Called with mutex_ held.
void LayerImpl::job_submitted(const Calrt_Job_Submit_Args& args, CalrtKv* kv,
                              std::optional<uint64_t> seq_end) {
  JobState job;
  job.calbin = args.calbin;
  job.input = args.input;
  job.output = args.output;
  job.kv = kv;
  job.in_flight = true;
  job.seq_end = seq_end;
  for (CalrtBuffer* buffer : {args.input, args.output}) {
    if (auto b = buffers_.find(buffer); b != buffers_.end()) {
      b->second.owner = args.job;
      // Only input tensors: the device writes the outputs itself.
      if (b->second.input) {
        for (const auto& [tensor, mapping] : b->second.stale) {
          job.snapshots.push_back(
              Snapshot{buffer, tensor, mapping,
                       std::vector<unsigned char>(mapping.data, mapping.data + mapping.size)});
        }
      }
    }
  }
  if (auto k = kvs_.find(kv); k != kvs_.end()) {
    k->second.user = args.job;
  }
  jobs_[args.job] = std::move(job);
}

CalrtError* LayerImpl::Job_Wait(Calrt_Job_Wait_Args* args) {
  VALIDATE_BEGIN(Job_Wait, CALRT_JOB_WAIT_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
  }
  CalrtError* error = adopt(inner_->Job_Wait(args));
  const std::lock_guard lock(mutex_);
  if (error == nullptr) {
    record_outs(call, *args);
    if (args->result == CALRT_WAIT_READY) {
      job_final(call, args->job, args->state == CALRT_JOB_COMPLETED);
    }
  } else if (CALRT_CODE_FAULT_CLASS(as_layer_error(error)->code) == CALRT_FAULT_DEVICE) {
    job_final(call, args->job, false);  // TIMED_OUT or FAILED with the device fault
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Job_Status(Calrt_Job_Status_Args* args) {
  // The struct that ends at end_time_ns (before the profiling fields) is still valid.
  VALIDATE_BEGIN(Job_Status, CALRT_STRUCT_SIZE(Calrt_Job_Status_Args, end_time_ns)) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
  }
  CalrtError* error = adopt(inner_->Job_Status(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    record_outs(call, *args);
    if (calrt_job_state_final(args->state)) {
      job_final(call, args->job, args->state == CALRT_JOB_COMPLETED);
    }
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Job_Cancel(Calrt_Job_Cancel_Args* args) {
  VALIDATE_BEGIN(Job_Cancel, CALRT_JOB_CANCEL_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
  }
  CalrtError* error = adopt(inner_->Job_Cancel(args));
  if (error == nullptr) {
    // Cancelling a job that completed unobserved is a no-op: its KV positions were written.
    const auto state = inner_job_state(args->job);
    const std::lock_guard lock(mutex_);
    job_final(call, args->job, state && *state == CALRT_JOB_COMPLETED);
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Job_Destroy(Calrt_Job_Destroy_Args* args) {
  VALIDATE_BEGIN(Job_Destroy, CALRT_JOB_DESTROY_ARGS_STRUCT_SIZE)
  bool tracked = false;
  {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
    auto it = jobs_.find(args->job);
    tracked = it != jobs_.end() && it->second.in_flight;
  }
  const auto state = tracked ? inner_job_state(args->job) : std::nullopt;
  CalrtError* error = adopt(inner_->Job_Destroy(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    job_final(call, args->job, state && *state == CALRT_JOB_COMPLETED);
    jobs_.erase(args->job);
    ids_.release(args->job);
  }
  return finish(call, error);
}

// ---------------------------------------------------------------------------------------
// KV.
// ---------------------------------------------------------------------------------------
CalrtError* LayerImpl::Kv_Allocate(Calrt_Kv_Allocate_Args* args) {
  VALIDATE_BEGIN(Kv_Allocate, CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
  }
  CalrtError* error = adopt(inner_->Kv_Allocate(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    kvs_[args->kv] = KvState{args->calbin, args->capacity_tokens, 0, nullptr};
    freed_kvs_.erase(args->kv);
    record_outs(call, *args);
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Kv_Apply(Calrt_Kv_Apply_Args* args) {
  // An ABI 0.7 caller's struct ends before `row` and means row 0 (calrt.h).
  const uint32_t row =
      args != nullptr && args->struct_size >= CALRT_KV_APPLY_ARGS_STRUCT_SIZE ? args->row : 0;
  VALIDATE_BEGIN(Kv_Apply, CALRT_KV_APPLY_ARGS_STRUCT_SIZE_0_7) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
    CalrtError* refused = nullptr;
    const std::string kv_name = ids_.name("kv", args->kv);
    const std::string buffer_name = ids_.name("buffer", args->input);
    if (freed_kvs_.count(args->kv) != 0) {
      refused = violate(
          call, "KV.apply-after-free", CALRT_INVALID_HANDLE,
          "Kv_Apply of " + kv_name + " to " + buffer_name + " after Kv_Free released it", true);
    } else if (kvs_.count(args->kv) == 0) {
      refused = violate(call, "KV.apply-unknown", CALRT_INVALID_HANDLE,
                        "Kv_Apply of " + kv_name + " to " + buffer_name +
                            ", a KV handle Kv_Allocate never returned (apply before allocate)",
                        true);
    } else if (auto b = buffers_.find(args->input);
               b != buffers_.end() && b->second.owner != nullptr) {
      refused = violate(call, "MAP.in-flight", CALRT_BUSY,
                        "Kv_Apply of " + kv_name + " to " + buffer_name + ", owned by in-flight " +
                            ids_.name("job", b->second.owner),
                        true);
    }
    if (refused != nullptr) {
      return finish(call, refused);
    }
  }
  CalrtError* error = adopt(inner_->Kv_Apply(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    // The sequence checks follow row 0, the only row of every model but a batch decode.
    if (auto b = buffers_.find(args->input); b != buffers_.end() && row == 0) {
      b->second.kv = args->kv;
    }
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Kv_Free(Calrt_Kv_Free_Args* args) {
  VALIDATE_BEGIN(Kv_Free, CALRT_KV_FREE_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
    const std::string kv_name = ids_.name("kv", args->kv);
    CalrtError* refused = nullptr;
    auto k = kvs_.find(args->kv);
    if (freed_kvs_.count(args->kv) != 0) {
      refused = violate(call, "KV.free-twice", CALRT_INVALID_HANDLE,
                        "Kv_Free of " + kv_name + ", freed already", true);
    } else if (k == kvs_.end()) {
      refused = violate(call, "KV.free-unknown", CALRT_INVALID_HANDLE,
                        "Kv_Free of " + kv_name + ", a KV handle Kv_Allocate never returned", true);
    } else if (k->second.user != nullptr) {
      refused = violate(call, "KV.in-flight", CALRT_BUSY,
                        "Kv_Free of " + kv_name + " while in-flight " +
                            ids_.name("job", k->second.user) + " uses it",
                        true);
    }
    if (refused != nullptr) {
      return finish(call, refused);
    }
  }
  CalrtError* error = adopt(inner_->Kv_Free(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    kvs_.erase(args->kv);
    freed_kvs_.insert(args->kv);
    ids_.release(args->kv);
    for (auto& [buffer, state] : buffers_) {
      if (state.kv == args->kv) {
        state.kv = nullptr;
      }
    }
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Kv_Clear(Calrt_Kv_Clear_Args* args) {
  VALIDATE_BEGIN(Kv_Clear, CALRT_KV_CLEAR_ARGS_STRUCT_SIZE) {
    const std::lock_guard lock(mutex_);
    record_ins(call, *args);
    auto k = kvs_.find(args->kv);
    if (k != kvs_.end() && k->second.user != nullptr) {
      if (CalrtError* refused =
              violate(call, "KV.in-flight", CALRT_BUSY,
                      "Kv_Clear of " + ids_.name("kv", args->kv) + " while in-flight " +
                          ids_.name("job", k->second.user) + " uses it",
                      true)) {
        return finish(call, refused);
      }
    }
  }
  CalrtError* error = adopt(inner_->Kv_Clear(args));
  if (error == nullptr) {
    const std::lock_guard lock(mutex_);
    if (auto k = kvs_.find(args->kv); k != kvs_.end()) {
      k->second.written = 0;
    }
  }
  return finish(call, error);
}

CalrtError* LayerImpl::Kv_Info(Calrt_Kv_Info_Args* args) { return pass_through(args); }

CalrtError* LayerImpl::Kv_Capacity(Calrt_Kv_Capacity_Args* args) { return pass_through(args); }

// ---------------------------------------------------------------------------------------
// Extensions: forwarded, errors adopted, calls recorded (a replay re-applies fault plans and
// host time).
// ---------------------------------------------------------------------------------------
CalrtError* LayerImpl::Clock_Get(Calrt_Clock_Get_Args* args) { return pass_through(args); }

CalrtError* LayerImpl::Clock_HostSpend(Calrt_Clock_HostSpend_Args* args) {
  return pass_through(args);
}

CalrtError* LayerImpl::Trace_Enable(Calrt_Trace_Enable_Args* args) { return pass_through(args); }

CalrtError* LayerImpl::Trace_Read(Calrt_Trace_Read_Args* args) { return pass_through(args); }

CalrtError* LayerImpl::Fault_SetPlan(Calrt_Fault_SetPlan_Args* args) { return pass_through(args); }

CalrtError* LayerImpl::Fault_GetHits(Calrt_Fault_GetHits_Args* args) { return pass_through(args); }

CalrtError* LayerImpl::Diag_Report(Calrt_Diag_Report_Args* args) { return pass_through(args); }

CalrtError* LayerImpl::Diag_StateHash(Calrt_Diag_StateHash_Args* args) {
  return pass_through(args);
}

#undef VALIDATE_BEGIN
#undef VALIDATE_FOR_EACH_EXT_ENTRY
#undef VALIDATE_FOR_EACH_ENTRY
#undef VALIDATE_HAS

}  // namespace

std::unique_ptr<Layer> wrap(const CalrtApi* inner, Options options,
                            std::shared_ptr<const void> inner_keepalive) {
  if (inner == nullptr) {
    throw std::invalid_argument("validate: no inner runtime table to wrap (NULL)");
  }
  if (inner->abi_major != CALRT_ABI_MAJOR || inner->Error_Destroy == nullptr ||
      inner->Error_Message == nullptr || inner->Error_GetCode == nullptr) {
    throw std::invalid_argument(
        "validate: the inner runtime's table (ABI " + std::to_string(inner->abi_major) +
        ") is not a usable CalRT table for ABI major " + std::to_string(CALRT_ABI_MAJOR));
  }
  for (int slot = 0; slot < kMaxLayers; ++slot) {
    LayerImpl* expected = nullptr;
    // A placeholder claims the slot while the layer is built: nothing calls through it yet.
    auto* claim = reinterpret_cast<LayerImpl*>(&g_slots);
    if (g_slots[static_cast<size_t>(slot)].compare_exchange_strong(expected, claim)) {
      try {
        auto layer = std::make_unique<LayerImpl>(inner, std::move(options),
                                                 std::move(inner_keepalive), slot);
        g_slots[static_cast<size_t>(slot)].store(layer.get(), std::memory_order_release);
        return layer;
      } catch (...) {
        g_slots[static_cast<size_t>(slot)].store(nullptr, std::memory_order_release);
        throw;
      }
    }
  }
  throw std::length_error("validate: every one of the " + std::to_string(kMaxLayers) +
                          " layer slots of this process is in use");
}

}  // namespace calrt::validate
