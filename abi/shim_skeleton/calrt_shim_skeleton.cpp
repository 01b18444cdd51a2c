// calrt_shim_skeleton.cpp: the starting point of a vendor shim, a shared library that
// implements abi/calrt.h over the proprietary CalRT SDK. abi/VENDOR_SHIM.md is the guide.
//
// Everything that does not need the SDK is done here as the ABI requires it: the table and
// CalrtGetApi, struct_size checks, NULL checks, enum range checks, generation-checked
// handles, error objects, bounded timeouts and the exception barrier. Every place where the
// SDK must be called is marked `// SDK:` with the CalRT call it stands for (named as in the
// vendor's adaptation guide where the guide names it) and returns CALRT_UNIMPLEMENTED with a
// message naming that call, so that a partly wired shim still tells its caller precisely
// what is missing. No input can crash it: handles are numbers that are decoded and looked
// up, never dereferenced.
//
// Copy this file, replace each `// SDK:` block with the SDK call and its error mapping
// (sdk_error_to_code below), and keep the validation that precedes it.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "abi/calrt.h"

// The ABI leaves CalrtError opaque; this is the shim's definition of it.
struct CalrtError {
  CalrtCode code = CALRT_INTERNAL;
  std::string message;
};

namespace {

// ---------------------------------------------------------------------------------------
// Errors. A caller may pass any pointer to Error_Destroy/Message/GetCode, so live errors
// are tracked: a forged or already destroyed one is ignored instead of freeing it twice.
// ---------------------------------------------------------------------------------------
std::mutex& error_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::unordered_set<const CalrtError*>& live_errors() {
  // Leaked on purpose: errors may be destroyed after static destructors ran.
  static auto* live = new std::unordered_set<const CalrtError*>();
  return *live;
}

// Returned when allocating an error fails, so that running out of host memory is still
// reported instead of turning into success (NULL) or a crash.
CalrtError out_of_memory_error{CALRT_INTERNAL, "out of host memory while reporting an error"};

CalrtError* make_error(CalrtCode code, const std::string& message) noexcept {
  try {
    auto* error = new CalrtError{code, message};
    std::lock_guard lock(error_mutex());
    live_errors().insert(error);
    return error;
  } catch (...) {
    return &out_of_memory_error;
  }
}

bool is_live_error(const CalrtError* error) noexcept {
  if (error == &out_of_memory_error) {
    return true;
  }
  std::lock_guard lock(error_mutex());
  return live_errors().count(error) > 0;
}

std::string hex(uintptr_t value) {
  char text[2 + 2 * sizeof(uintptr_t) + 1];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

// Where the SDK call is not wired yet. The message names the ABI entry and the SDK call,
// so a caller (and the conformance report) says exactly what the shim still lacks.
CalrtError* sdk_unimplemented(const char* entry, const char* sdk_call,
                              const std::string& detail = {}) noexcept {
  try {
    std::string message = std::string(entry) + ": the CalRT SDK call " + sdk_call +
                          " is not wired in this shim (calrt_shim_skeleton)";
    if (!detail.empty()) {
      message += "; " + detail;
    }
    return make_error(CALRT_UNIMPLEMENTED, message);
  } catch (...) {
    return &out_of_memory_error;
  }
}

// Where an SDK status becomes a CalRT code. Fill it from the SDK's error list; the guide's
// table (VENDOR_SHIM.md, "Mapping SDK errors") gives the usual cases. Anything unknown is
// a device-class fault: the caller resets, which is safe, whereas a wrongly chosen request
// class would let it keep sending work to a broken card.
[[maybe_unused]] CalrtCode sdk_error_to_code(int sdk_status) noexcept {
  switch (sdk_status) {
    // SDK: one case per SDK status, e.g. `case SDK_ERR_TIMEOUT: return CALRT_DEVICE_HUNG;`
    default:
      return CALRT_INTERNAL;
  }
}

// ---------------------------------------------------------------------------------------
// Argument checks, the first lines of every entry.
// ---------------------------------------------------------------------------------------
template <class Args>
CalrtError* check_args(const Args* args, size_t min_size, const char* struct_name) noexcept {
  if (args == nullptr) {
    return make_error(CALRT_INVALID_ARGUMENT, std::string(struct_name) + " pointer is NULL");
  }
  // Larger is a newer caller: its extra fields are ignored. Smaller would make every read
  // of a later field go past the caller's struct.
  if (args->struct_size < min_size) {
    return make_error(CALRT_STRUCT_TOO_SMALL, std::string(struct_name) + ": struct_size " +
                                                  std::to_string(args->struct_size) + " < " +
                                                  std::to_string(min_size) + " required by ABI " +
                                                  std::to_string(CALRT_ABI_MAJOR) + "." +
                                                  std::to_string(CALRT_ABI_MINOR));
  }
  return nullptr;
}

CalrtError* require_string(const char* value, const char* struct_name, const char* field) {
  if (value == nullptr) {
    return make_error(CALRT_INVALID_ARGUMENT,
                      std::string(struct_name) + "." + field + " is NULL; a string is required");
  }
  return nullptr;
}

// An enum field as the integer the caller stored. Any integer can arrive over the C
// boundary, and loading an out-of-range value as the enum type is undefined behaviour, so
// the bytes are copied out instead.
template <class Enum>
int64_t raw_enum(const Enum& field) {
  std::underlying_type_t<Enum> raw{};
  std::memcpy(&raw, &field, sizeof(raw));
  return static_cast<int64_t>(raw);
}

template <class Enum>
CalrtError* require_enum(const Enum& field_value, int first, int count, const char* struct_name,
                         const char* field) {
  const int64_t number = raw_enum(field_value);
  if (number < first || number >= count) {
    return make_error(CALRT_INVALID_ARGUMENT, std::string(struct_name) + "." + field + " " +
                                                  std::to_string(number) + " is not a valid value");
  }
  return nullptr;
}

// Runs body behind the argument check and an exception barrier: no C++ exception may
// cross the C boundary (it would terminate the caller's process).
template <class Args, class Body>
CalrtError* guarded(Args* args, size_t min_size, const char* struct_name, Body&& body) noexcept {
  if (CalrtError* error = check_args(args, min_size, struct_name)) {
    return error;
  }
  try {
    return body();
  } catch (const std::exception& e) {
    return make_error(CALRT_INTERNAL, std::string(struct_name) + ": exception: " + e.what());
  } catch (...) {
    return make_error(CALRT_INTERNAL, std::string(struct_name) + ": unknown exception");
  }
}

// ---------------------------------------------------------------------------------------
// Time. Every wait has a deadline on the monotonic clock: wall-clock jumps (NTP, an
// operator) must neither cut a wait short nor stretch it.
// ---------------------------------------------------------------------------------------
constexpr uint64_t kDefaultTimeoutNs = uint64_t{30} * 1000 * 1000 * 1000;

struct Deadline {
  bool infinite = false;
  uint64_t bound_ns = 0;  // the timeout after the default was applied, for messages
  std::chrono::steady_clock::time_point at{};

  static Deadline after(uint64_t timeout_ns) {
    Deadline deadline;
    if (timeout_ns == CALRT_TIMEOUT_INFINITE) {
      deadline.infinite = true;  // only when the caller asked for it explicitly
      return deadline;
    }
    const uint64_t bounded = timeout_ns == CALRT_TIMEOUT_DEFAULT ? kDefaultTimeoutNs : timeout_ns;
    deadline.bound_ns = bounded;
    deadline.at = std::chrono::steady_clock::now() +
                  std::chrono::nanoseconds(static_cast<int64_t>(
                      bounded > uint64_t{INT64_MAX} / 2 ? uint64_t{INT64_MAX} / 2 : bounded));
    return deadline;
  }

  // What to pass to an SDK call that takes a relative timeout, re-evaluated before each
  // call so that a retry loop never extends the caller's deadline.
  uint64_t remaining_ns() const {
    if (infinite) {
      return CALRT_TIMEOUT_INFINITE;
    }
    const auto left = at - std::chrono::steady_clock::now();
    return left.count() <= 0
               ? 0
               : static_cast<uint64_t>(
                     std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
  }

  std::string describe() const {
    return infinite ? std::string("timeout infinite")
                    : "timeout " + std::to_string(bound_ns) + " ns";
  }
};

// ---------------------------------------------------------------------------------------
// Handles: numbers, not pointers. kind (4 bits) | slot (20 bits) | generation (32 bits).
// Releasing a handle bumps its slot's generation, so a stale or double-released handle
// decodes to a slot whose generation differs and is rejected with INVALID_HANDLE.
// ---------------------------------------------------------------------------------------
enum class HandleKind : uint32_t { device = 1, calbin = 2, buffer = 3, job = 4, kv = 5 };

constexpr uint32_t kSlotBits = 20;
constexpr uint32_t kMaxSlots = uint32_t{1} << kSlotBits;

// One opened VDevice. Its mutex serialises calls on the device; it is never held across an
// SDK call that can block without a bound (see VENDOR_SHIM.md, "Threads").
struct DeviceObject {
  std::mutex mutex;
  void* sdk_device = nullptr;  // SDK: the handle CreateVDevice returns
  bool parallel_mode = false;
};

// Calbins, buffers, jobs and KV handles keep their device alive and name it for locking.
struct ChildObject {
  std::shared_ptr<DeviceObject> device;
  void* sdk_object = nullptr;  // SDK: the calbin / buffer / job / KV handle of the SDK
};

template <class Object>
class HandleTable {
 public:
  explicit HandleTable(HandleKind kind) : kind_(kind) {}

  // Issues a handle for a new object; 0 when the table is full (report INVALID_ARGUMENT or
  // OUT_OF_DEVICE_MEMORY, never wrap around onto a live slot).
  uintptr_t issue(std::shared_ptr<Object> object) {
    std::lock_guard lock(mutex_);
    for (uint32_t slot = 0; slot < slots_.size(); ++slot) {
      if (!slots_[slot].object) {
        slots_[slot].object = std::move(object);
        return encode(slot, slots_[slot].generation);
      }
    }
    if (slots_.size() >= kMaxSlots) {
      return 0;
    }
    slots_.push_back(Slot{1, std::move(object)});
    return encode(static_cast<uint32_t>(slots_.size() - 1), 1);
  }

  // The live object for a handle, or null: never-issued, released, forged and other-kind
  // handles all decode to nothing.
  std::shared_ptr<Object> find(const void* handle) {
    uint32_t slot = 0;
    uint32_t generation = 0;
    if (!decode(handle, slot, generation)) {
      return nullptr;
    }
    std::lock_guard lock(mutex_);
    if (slot >= slots_.size() || slots_[slot].generation != generation) {
      return nullptr;
    }
    return slots_[slot].object;
  }

  // Removes the object and invalidates every copy of its handle.
  std::shared_ptr<Object> release(const void* handle) {
    uint32_t slot = 0;
    uint32_t generation = 0;
    if (!decode(handle, slot, generation)) {
      return nullptr;
    }
    std::lock_guard lock(mutex_);
    if (slot >= slots_.size() || slots_[slot].generation != generation) {
      return nullptr;
    }
    std::shared_ptr<Object> object = std::move(slots_[slot].object);
    // Generation 0 is never issued, so a wrapped generation cannot match a zero handle.
    slots_[slot].generation =
        slots_[slot].generation == UINT32_MAX ? 1 : slots_[slot].generation + 1;
    return object;
  }

 private:
  struct Slot {
    uint32_t generation = 1;
    std::shared_ptr<Object> object;
  };

  uintptr_t encode(uint32_t slot, uint32_t generation) const {
    return (static_cast<uintptr_t>(generation) << 24) | (static_cast<uintptr_t>(slot) << 4) |
           static_cast<uintptr_t>(kind_);
  }

  bool decode(const void* handle, uint32_t& slot, uint32_t& generation) const {
    static_assert(sizeof(uintptr_t) >= 8, "handles pack 56 bits into a pointer");
    const auto value = reinterpret_cast<uintptr_t>(handle);
    if ((value & 0xF) != static_cast<uintptr_t>(kind_)) {
      return false;
    }
    slot = static_cast<uint32_t>((value >> 4) & (kMaxSlots - 1));
    generation = static_cast<uint32_t>(value >> 24);
    return generation != 0 && (value >> 56) == 0;
  }

  HandleKind kind_;
  std::mutex mutex_;
  std::vector<Slot> slots_;
};

// Instantiated in full so that the build checks issue() too, which only wired SDK calls use.
template class HandleTable<DeviceObject>;
template class HandleTable<ChildObject>;

HandleTable<DeviceObject>& devices() {
  static auto* table = new HandleTable<DeviceObject>(HandleKind::device);
  return *table;
}
HandleTable<ChildObject>& calbins() {
  static auto* table = new HandleTable<ChildObject>(HandleKind::calbin);
  return *table;
}
HandleTable<ChildObject>& buffers() {
  static auto* table = new HandleTable<ChildObject>(HandleKind::buffer);
  return *table;
}
HandleTable<ChildObject>& jobs() {
  static auto* table = new HandleTable<ChildObject>(HandleKind::job);
  return *table;
}
HandleTable<ChildObject>& kvs() {
  static auto* table = new HandleTable<ChildObject>(HandleKind::kv);
  return *table;
}

// Looks a handle up; the error names the type, the field and the value.
template <class Object>
CalrtError* lookup(HandleTable<Object>& table, const void* handle, const char* type,
                   const char* field, std::shared_ptr<Object>& out) {
  out = table.find(handle);
  if (!out) {
    return make_error(CALRT_INVALID_HANDLE, std::string(field) + ": " + type + " handle " +
                                                hex(reinterpret_cast<uintptr_t>(handle)) +
                                                " was released or never issued");
  }
  return nullptr;
}

template <class Object>
CalrtError* release(HandleTable<Object>& table, const void* handle, const char* type,
                    const char* field, std::shared_ptr<Object>& out) {
  out = table.release(handle);
  if (!out) {
    return make_error(CALRT_INVALID_HANDLE, std::string(field) + ": " + type + " handle " +
                                                hex(reinterpret_cast<uintptr_t>(handle)) +
                                                " was released or never issued");
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------
// Errors: these three never fail and return nothing, so bad arguments are ignored.
// ---------------------------------------------------------------------------------------
void error_destroy(Calrt_Error_Destroy_Args* args) noexcept {
  if (args == nullptr || args->struct_size < CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE ||
      args->error == nullptr || args->error == &out_of_memory_error) {
    return;
  }
  {
    std::lock_guard lock(error_mutex());
    if (live_errors().erase(args->error) == 0) {
      return;  // forged or already destroyed
    }
  }
  delete args->error;
}

void error_message(Calrt_Error_Message_Args* args) noexcept {
  if (args == nullptr || args->struct_size < CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE) {
    return;
  }
  static const char kNotAnError[] = "(not a live CalrtError)";
  if (!is_live_error(args->error)) {
    args->message = kNotAnError;
    args->message_size = sizeof(kNotAnError) - 1;
    return;
  }
  args->message = args->error->message.c_str();
  args->message_size = args->error->message.size();
}

void error_get_code(Calrt_Error_GetCode_Args* args) noexcept {
  if (args == nullptr || args->struct_size < CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE) {
    return;
  }
  args->code = is_live_error(args->error) ? args->error->code : CALRT_INVALID_HANDLE;
}

// ---------------------------------------------------------------------------------------
// Device: CreateVDevice, Status, Reset, parallel mode.
// ---------------------------------------------------------------------------------------
CalrtError* device_create(Calrt_Device_Create_Args* args) noexcept {
  return guarded(args, CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE, "Calrt_Device_Create_Args", [&] {
    args->device = nullptr;  // a caller must never see a stale value on failure
    if (CalrtError* e = require_enum(args->kind, 1, CALRT_DEVICE_KIND_COUNT_,
                                     "Calrt_Device_Create_Args", "kind")) {
      return e;
    }
    // A hardware shim serves physical cards only; the simulator is libcalrt_sim.so.
    if (args->kind != CALRT_DEVICE_PCIE) {
      return make_error(CALRT_INVALID_ARGUMENT,
                        "Calrt_Device_Create_Args.kind " + std::to_string(raw_enum(args->kind)) +
                            ": this runtime serves only CALRT_DEVICE_PCIE (1)");
    }
    const Deadline deadline = Deadline::after(args->timeout_ns);
    // SDK: CreateVDevice(PCIE) for card args->index, parsing args->config (key=value;...)
    //   into SDK options first (an unknown key is INVALID_ARGUMENT naming it); no card at
    //   that index is NOT_FOUND. Then:
    //   auto device = std::make_shared<DeviceObject>(); device->sdk_device = <sdk handle>;
    //   args->device = reinterpret_cast<CalrtDevice*>(devices().issue(device));
    return sdk_unimplemented(
        "Device_Create", "CreateVDevice(PCIE)",
        "card index " + std::to_string(args->index) + ", " + deadline.describe());
  });
}

CalrtError* device_destroy(Calrt_Device_Destroy_Args* args) noexcept {
  return guarded(args, CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Device_Destroy_Args", [&] {
    std::shared_ptr<DeviceObject> device;
    if (CalrtError* e = release(devices(), args->device, "CalrtDevice",
                                "Calrt_Device_Destroy_Args.device", device)) {
      return e;
    }
    // SDK: cancel in-flight jobs and close the VDevice (the counterpart of CreateVDevice),
    //   with a bounded wait: a hung card must not hang Destroy.
    return sdk_unimplemented("Device_Destroy", "the VDevice close (CreateVDevice's counterpart)");
  });
}

CalrtError* device_status(Calrt_Device_Status_Args* args) noexcept {
  return guarded(args, CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE, "Calrt_Device_Status_Args", [&] {
    std::shared_ptr<DeviceObject> device;
    if (CalrtError* e = lookup(devices(), args->device, "CalrtDevice",
                               "Calrt_Device_Status_Args.device", device)) {
      return e;
    }
    // SDK: Status() for state, error/reset counters and the runtime, firmware and driver
    //   versions. Allowed in every state, including after DEVICE_LOST.
    return sdk_unimplemented("Device_Status", "Status()");
  });
}

CalrtError* device_chip_status(Calrt_Device_ChipStatus_Args* args) noexcept {
  return guarded(args, CALRT_DEVICE_CHIPSTATUS_ARGS_STRUCT_SIZE, "Calrt_Device_ChipStatus_Args",
                 [&] {
                   std::shared_ptr<DeviceObject> device;
                   if (CalrtError* e = lookup(devices(), args->device, "CalrtDevice",
                                              "Calrt_Device_ChipStatus_Args.device", device)) {
                     return e;
                   }
                   // SDK: the per-chip part of Status() (health, DRAM total/used, ECC counters);
                   //   chip >= the chip count is OUT_OF_RANGE naming both numbers.
                   return sdk_unimplemented("Device_ChipStatus", "Status() per chip",
                                            "chip " + std::to_string(args->chip));
                 });
}

CalrtError* device_reset(Calrt_Device_Reset_Args* args) noexcept {
  return guarded(args, CALRT_DEVICE_RESET_ARGS_STRUCT_SIZE, "Calrt_Device_Reset_Args", [&] {
    std::shared_ptr<DeviceObject> device;
    if (CalrtError* e = lookup(devices(), args->device, "CalrtDevice",
                               "Calrt_Device_Reset_Args.device", device)) {
      return e;
    }
    if (CalrtError* e = require_enum(args->level, 1, CALRT_RESET_LEVEL_COUNT_,
                                     "Calrt_Device_Reset_Args", "level")) {
      return e;
    }
    const Deadline deadline = Deadline::after(args->timeout_ns);
    // SDK: the reset of this level (job abort / cores / chip / full), then the SDK's
    //   self-test; report the state after it. Levels the SDK lacks map to the next higher.
    return sdk_unimplemented(
        "Device_Reset", "reset",
        "level " + std::to_string(raw_enum(args->level)) + ", " + deadline.describe());
  });
}

CalrtError* device_set_parallel_mode(Calrt_Device_SetParallelMode_Args* args) noexcept {
  return guarded(args, CALRT_DEVICE_SETPARALLELMODE_ARGS_STRUCT_SIZE,
                 "Calrt_Device_SetParallelMode_Args", [&] {
                   std::shared_ptr<DeviceObject> device;
                   if (CalrtError* e = lookup(devices(), args->device, "CalrtDevice",
                                              "Calrt_Device_SetParallelMode_Args.device", device)) {
                     return e;
                   }
                   // SDK: parallel mode on/off (fixed ping/pong I/O addresses); a job in
                   //   flight is WRONG_STATE.
                   return sdk_unimplemented("Device_SetParallelMode", "parallel mode",
                                            args->enable != 0 ? "enable" : "disable");
                 });
}

// ---------------------------------------------------------------------------------------
// Calbin: CreateCalbin, info, configure.
// ---------------------------------------------------------------------------------------
CalrtError* calbin_create(Calrt_Calbin_Create_Args* args) noexcept {
  return guarded(args, CALRT_CALBIN_CREATE_ARGS_STRUCT_SIZE, "Calrt_Calbin_Create_Args", [&] {
    args->calbin = nullptr;
    std::shared_ptr<DeviceObject> device;
    if (CalrtError* e = lookup(devices(), args->device, "CalrtDevice",
                               "Calrt_Calbin_Create_Args.device", device)) {
      return e;
    }
    if (CalrtError* e = require_string(args->path, "Calrt_Calbin_Create_Args", "path")) {
      return e;
    }
    const Deadline deadline = Deadline::after(args->timeout_ns);
    // SDK: CreateCalbin() on args->path; a malformed package is CALBIN_INVALID naming the
    //   file, one for another chip count or runtime ABI is CALBIN_MISMATCH.
    return sdk_unimplemented("Calbin_Create", "CreateCalbin()",
                             std::string("path '") + args->path + "', " + deadline.describe());
  });
}

CalrtError* calbin_destroy(Calrt_Calbin_Destroy_Args* args) noexcept {
  return guarded(args, CALRT_CALBIN_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Calbin_Destroy_Args", [&] {
    std::shared_ptr<ChildObject> calbin;
    if (CalrtError* e = release(calbins(), args->calbin, "CalrtCalbin",
                                "Calrt_Calbin_Destroy_Args.calbin", calbin)) {
      return e;
    }
    // SDK: unload the calbin (CreateCalbin's counterpart) and release its device memory.
    return sdk_unimplemented("Calbin_Destroy", "the calbin unload (CreateCalbin's counterpart)");
  });
}

CalrtError* calbin_get_info(Calrt_Calbin_GetInfo_Args* args) noexcept {
  return guarded(args, CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetInfo_Args", [&] {
    std::shared_ptr<ChildObject> calbin;
    if (CalrtError* e = lookup(calbins(), args->calbin, "CalrtCalbin",
                               "Calrt_Calbin_GetInfo_Args.calbin", calbin)) {
      return e;
    }
    // SDK: the calbin's version, model list and LLM info (what CreateCalbin() reports).
    return sdk_unimplemented("Calbin_GetInfo", "the calbin version and LLM info query");
  });
}

CalrtError* calbin_get_model(Calrt_Calbin_GetModel_Args* args) noexcept {
  return guarded(args, CALRT_CALBIN_GETMODEL_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetModel_Args", [&] {
    std::shared_ptr<ChildObject> calbin;
    if (CalrtError* e = lookup(calbins(), args->calbin, "CalrtCalbin",
                               "Calrt_Calbin_GetModel_Args.calbin", calbin)) {
      return e;
    }
    // SDK: the model list of the calbin; model_index past its end is OUT_OF_RANGE.
    return sdk_unimplemented("Calbin_GetModel", "the calbin model list query",
                             "model_index " + std::to_string(args->model_index));
  });
}

CalrtError* calbin_get_tensor(Calrt_Calbin_GetTensor_Args* args) noexcept {
  return guarded(args, CALRT_CALBIN_GETTENSOR_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetTensor_Args", [&] {
    std::shared_ptr<ChildObject> calbin;
    if (CalrtError* e = lookup(calbins(), args->calbin, "CalrtCalbin",
                               "Calrt_Calbin_GetTensor_Args.calbin", calbin)) {
      return e;
    }
    if (CalrtError* e =
            require_string(args->model_name, "Calrt_Calbin_GetTensor_Args", "model_name")) {
      return e;
    }
    if (CalrtError* e = require_enum(args->direction, 1, CALRT_DIRECTION_COUNT_,
                                     "Calrt_Calbin_GetTensor_Args", "direction")) {
      return e;
    }
    // SDK: the tensor descriptor (shape, dtype, layout with tile D0, address, chip
    //   mask) of the model whose name equals model_name exactly (strcmp, never a
    //   substring match).
    return sdk_unimplemented("Calbin_GetTensor", "the model I/O tensor descriptor query",
                             std::string("model '") + args->model_name + "'");
  });
}

CalrtError* calbin_get_csr(Calrt_Calbin_GetCsr_Args* args) noexcept {
  return guarded(args, CALRT_CALBIN_GETCSR_ARGS_STRUCT_SIZE, "Calrt_Calbin_GetCsr_Args", [&] {
    std::shared_ptr<ChildObject> calbin;
    if (CalrtError* e = lookup(calbins(), args->calbin, "CalrtCalbin",
                               "Calrt_Calbin_GetCsr_Args.calbin", calbin)) {
      return e;
    }
    if (CalrtError* e =
            require_string(args->model_name, "Calrt_Calbin_GetCsr_Args", "model_name")) {
      return e;
    }
    // SDK: the model's CSR list (cur_seq_len, past_kv_cur_seq_len, ...), model by exact name.
    return sdk_unimplemented("Calbin_GetCsr", "the model CSR list query",
                             std::string("model '") + args->model_name + "'");
  });
}

CalrtError* calbin_configure(Calrt_Calbin_Configure_Args* args) noexcept {
  return guarded(args, CALRT_CALBIN_CONFIGURE_ARGS_STRUCT_SIZE, "Calrt_Calbin_Configure_Args", [&] {
    std::shared_ptr<ChildObject> calbin;
    if (CalrtError* e = lookup(calbins(), args->calbin, "CalrtCalbin",
                               "Calrt_Calbin_Configure_Args.calbin", calbin)) {
      return e;
    }
    const Deadline deadline = Deadline::after(args->timeout_ns);
    // SDK: configure(), timing it on the device clock if the SDK has one; report the
    //   per-chip memory the calbin took. Not enough DRAM is OUT_OF_DEVICE_MEMORY.
    return sdk_unimplemented("Calbin_Configure", "configure()", deadline.describe());
  });
}

// ---------------------------------------------------------------------------------------
// Buffers: InputBuf/OutputBuf by exact model name, MapBuf/UnMapBuf, CSRs.
// ---------------------------------------------------------------------------------------
CalrtError* buffer_create(Calrt_Buffer_Create_Args* args) noexcept {
  return guarded(args, CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE, "Calrt_Buffer_Create_Args", [&] {
    args->buffer = nullptr;
    std::shared_ptr<ChildObject> calbin;
    if (CalrtError* e = lookup(calbins(), args->calbin, "CalrtCalbin",
                               "Calrt_Buffer_Create_Args.calbin", calbin)) {
      return e;
    }
    if (CalrtError* e =
            require_string(args->model_name, "Calrt_Buffer_Create_Args", "model_name")) {
      return e;
    }
    if (CalrtError* e = require_enum(args->direction, 1, CALRT_DIRECTION_COUNT_,
                                     "Calrt_Buffer_Create_Args", "direction")) {
      return e;
    }
    if (args->slot > 1) {
      return make_error(
          CALRT_INVALID_ARGUMENT,
          "Calrt_Buffer_Create_Args.slot " + std::to_string(args->slot) + ": 0 (ping) or 1 (pong)");
    }
    // SDK: InputBuf / OutputBuf for the model named exactly model_name (no model of that
    //   name is NOT_FOUND listing the models); slot 1 needs parallel mode (INVALID_ARGUMENT).
    return sdk_unimplemented(
        "Buffer_Create", args->direction == CALRT_INPUT ? "InputBuf" : "OutputBuf",
        std::string("model '") + args->model_name + "', slot " + std::to_string(args->slot));
  });
}

CalrtError* buffer_destroy(Calrt_Buffer_Destroy_Args* args) noexcept {
  return guarded(args, CALRT_BUFFER_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Buffer_Destroy_Args", [&] {
    std::shared_ptr<ChildObject> buffer;
    // Look up before releasing: a buffer owned by an in-flight job is BUSY and stays valid.
    if (CalrtError* e = lookup(buffers(), args->buffer, "CalrtBuffer",
                               "Calrt_Buffer_Destroy_Args.buffer", buffer)) {
      return e;
    }
    // SDK: release the InputBuf/OutputBuf (BUSY while a job owns it), then
    //   buffers().release(args->buffer).
    return sdk_unimplemented("Buffer_Destroy", "the InputBuf/OutputBuf release");
  });
}

CalrtError* buffer_map(Calrt_Buffer_Map_Args* args) noexcept {
  return guarded(args, CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE, "Calrt_Buffer_Map_Args", [&] {
    args->data = nullptr;
    args->size_bytes = 0;
    std::shared_ptr<ChildObject> buffer;
    if (CalrtError* e = lookup(buffers(), args->buffer, "CalrtBuffer",
                               "Calrt_Buffer_Map_Args.buffer", buffer)) {
      return e;
    }
    const Deadline deadline = Deadline::after(args->timeout_ns);
    // SDK: MapBuf on tensor tensor_index (OUT_OF_RANGE past the model's tensors; BUSY when
    //   already mapped or owned by an in-flight job, naming the job).
    return sdk_unimplemented(
        "Buffer_Map", "MapBuf",
        "tensor " + std::to_string(args->tensor_index) + ", " + deadline.describe());
  });
}

CalrtError* buffer_unmap(Calrt_Buffer_Unmap_Args* args) noexcept {
  return guarded(args, CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE, "Calrt_Buffer_Unmap_Args", [&] {
    std::shared_ptr<ChildObject> buffer;
    if (CalrtError* e = lookup(buffers(), args->buffer, "CalrtBuffer",
                               "Calrt_Buffer_Unmap_Args.buffer", buffer)) {
      return e;
    }
    // SDK: UnMapBuf on tensor tensor_index (WRONG_STATE when it is not mapped).
    return sdk_unimplemented("Buffer_Unmap", "UnMapBuf",
                             "tensor " + std::to_string(args->tensor_index));
  });
}

CalrtError* buffer_set_csr(Calrt_Buffer_SetCsr_Args* args) noexcept {
  return guarded(args, CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE, "Calrt_Buffer_SetCsr_Args", [&] {
    std::shared_ptr<ChildObject> buffer;
    if (CalrtError* e = lookup(buffers(), args->buffer, "CalrtBuffer",
                               "Calrt_Buffer_SetCsr_Args.buffer", buffer)) {
      return e;
    }
    // SDK: the CSR write of the input buffer (cur_seq_len, past_kv_cur_seq_len); the value
    //   is passed through unchanged, never clamped or corrected.
    return sdk_unimplemented("Buffer_SetCsr", "the CSR set (cur_seq_len / past_kv_cur_seq_len)",
                             "csr " + std::to_string(args->csr_index));
  });
}

CalrtError* buffer_get_csr(Calrt_Buffer_GetCsr_Args* args) noexcept {
  return guarded(args, CALRT_BUFFER_GETCSR_ARGS_STRUCT_SIZE, "Calrt_Buffer_GetCsr_Args", [&] {
    std::shared_ptr<ChildObject> buffer;
    if (CalrtError* e = lookup(buffers(), args->buffer, "CalrtBuffer",
                               "Calrt_Buffer_GetCsr_Args.buffer", buffer)) {
      return e;
    }
    // SDK: the CSR read of the input buffer.
    return sdk_unimplemented("Buffer_GetCsr", "the CSR get",
                             "csr " + std::to_string(args->csr_index));
  });
}

// ---------------------------------------------------------------------------------------
// Jobs: submit, Wait(timeout), status, cancel.
// ---------------------------------------------------------------------------------------
CalrtError* job_submit(Calrt_Job_Submit_Args* args) noexcept {
  return guarded(args, CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE, "Calrt_Job_Submit_Args", [&] {
    args->job = nullptr;
    std::shared_ptr<ChildObject> calbin;
    std::shared_ptr<ChildObject> input;
    std::shared_ptr<ChildObject> output;
    if (CalrtError* e = lookup(calbins(), args->calbin, "CalrtCalbin",
                               "Calrt_Job_Submit_Args.calbin", calbin)) {
      return e;
    }
    if (CalrtError* e = require_string(args->model_name, "Calrt_Job_Submit_Args", "model_name")) {
      return e;
    }
    if (CalrtError* e =
            lookup(buffers(), args->input, "CalrtBuffer", "Calrt_Job_Submit_Args.input", input)) {
      return e;
    }
    if (CalrtError* e = lookup(buffers(), args->output, "CalrtBuffer",
                               "Calrt_Job_Submit_Args.output", output)) {
      return e;
    }
    // SDK: submit the model named exactly model_name with these buffers; from here until
    //   the job is final both buffers are owned by the job (Map/SetCsr/Destroy are BUSY).
    return sdk_unimplemented("Job_Submit", "submit",
                             std::string("model '") + args->model_name + "'");
  });
}

CalrtError* job_wait(Calrt_Job_Wait_Args* args) noexcept {
  return guarded(args, CALRT_JOB_WAIT_ARGS_STRUCT_SIZE, "Calrt_Job_Wait_Args", [&] {
    std::shared_ptr<ChildObject> job;
    if (CalrtError* e = lookup(jobs(), args->job, "CalrtJob", "Calrt_Job_Wait_Args.job", job)) {
      return e;
    }
    const Deadline deadline = Deadline::after(args->timeout_ns);
    // SDK: Wait() with deadline.remaining_ns(), without holding the device mutex. The SDK's
    //   timeout is NOT_READY (no error, the job is still in flight), not DEVICE_HUNG; only
    //   the card's own watchdog or a failed health check makes DEVICE_HUNG.
    return sdk_unimplemented("Job_Wait", "Wait()", deadline.describe());
  });
}

CalrtError* job_status(Calrt_Job_Status_Args* args) noexcept {
  return guarded(args, CALRT_JOB_STATUS_ARGS_STRUCT_SIZE, "Calrt_Job_Status_Args", [&] {
    std::shared_ptr<ChildObject> job;
    if (CalrtError* e = lookup(jobs(), args->job, "CalrtJob", "Calrt_Job_Status_Args.job", job)) {
      return e;
    }
    // SDK: the job's state and timestamps; never blocks. The profiling fields after
    //   end_time_ns are written only when args->struct_size covers them.
    return sdk_unimplemented("Job_Status", "the job status query");
  });
}

CalrtError* job_cancel(Calrt_Job_Cancel_Args* args) noexcept {
  return guarded(args, CALRT_JOB_CANCEL_ARGS_STRUCT_SIZE, "Calrt_Job_Cancel_Args", [&] {
    std::shared_ptr<ChildObject> job;
    if (CalrtError* e = lookup(jobs(), args->job, "CalrtJob", "Calrt_Job_Cancel_Args.job", job)) {
      return e;
    }
    // SDK: cancel the job (a no-op when final); it releases its buffers.
    return sdk_unimplemented("Job_Cancel", "the job cancel");
  });
}

CalrtError* job_destroy(Calrt_Job_Destroy_Args* args) noexcept {
  return guarded(args, CALRT_JOB_DESTROY_ARGS_STRUCT_SIZE, "Calrt_Job_Destroy_Args", [&] {
    std::shared_ptr<ChildObject> job;
    if (CalrtError* e = release(jobs(), args->job, "CalrtJob", "Calrt_Job_Destroy_Args.job", job)) {
      return e;
    }
    // SDK: cancel the job if still in flight, then release the SDK's job object.
    return sdk_unimplemented("Job_Destroy", "the job cancel and release");
  });
}

// ---------------------------------------------------------------------------------------
// KV cache: allocate / apply / free / clear and capacity.
// ---------------------------------------------------------------------------------------
CalrtError* kv_allocate(Calrt_Kv_Allocate_Args* args) noexcept {
  return guarded(args, CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE, "Calrt_Kv_Allocate_Args", [&] {
    args->kv = nullptr;
    std::shared_ptr<ChildObject> calbin;
    if (CalrtError* e = lookup(calbins(), args->calbin, "CalrtCalbin",
                               "Calrt_Kv_Allocate_Args.calbin", calbin)) {
      return e;
    }
    if (args->capacity_tokens == 0) {
      return make_error(CALRT_INVALID_ARGUMENT,
                        "Calrt_Kv_Allocate_Args.capacity_tokens 0: at least 1 token");
    }
    // SDK: KV allocate; no room is KV_EXHAUSTED saying how many tokens are free.
    return sdk_unimplemented("Kv_Allocate", "KV allocate",
                             std::to_string(args->capacity_tokens) + " tokens");
  });
}

CalrtError* kv_apply(Calrt_Kv_Apply_Args* args) noexcept {
  // An ABI 0.7 caller's struct ends before `row` and means row 0 (calrt.h).
  return guarded(args, CALRT_KV_APPLY_ARGS_STRUCT_SIZE_0_7, "Calrt_Kv_Apply_Args", [&] {
    std::shared_ptr<ChildObject> kv;
    std::shared_ptr<ChildObject> input;
    if (CalrtError* e = lookup(kvs(), args->kv, "CalrtKv", "Calrt_Kv_Apply_Args.kv", kv)) {
      return e;
    }
    if (CalrtError* e =
            lookup(buffers(), args->input, "CalrtBuffer", "Calrt_Kv_Apply_Args.input", input)) {
      return e;
    }
    const uint32_t row = args->struct_size >= CALRT_KV_APPLY_ARGS_STRUCT_SIZE ? args->row : 0;
    // SDK: KV apply (bind the KV handle to the input buffer's decode row `row`; a row at or
    // past the model's batch is INVALID_ARGUMENT).
    return sdk_unimplemented("Kv_Apply", "KV apply", "row " + std::to_string(row));
  });
}

CalrtError* kv_free(Calrt_Kv_Free_Args* args) noexcept {
  return guarded(args, CALRT_KV_FREE_ARGS_STRUCT_SIZE, "Calrt_Kv_Free_Args", [&] {
    std::shared_ptr<ChildObject> kv;
    // Look up before releasing: a KV in use by an in-flight job is BUSY and stays valid.
    if (CalrtError* e = lookup(kvs(), args->kv, "CalrtKv", "Calrt_Kv_Free_Args.kv", kv)) {
      return e;
    }
    // SDK: KV free, then kvs().release(args->kv) so that a double free is INVALID_HANDLE.
    return sdk_unimplemented("Kv_Free", "KV free");
  });
}

CalrtError* kv_clear(Calrt_Kv_Clear_Args* args) noexcept {
  return guarded(args, CALRT_KV_CLEAR_ARGS_STRUCT_SIZE, "Calrt_Kv_Clear_Args", [&] {
    std::shared_ptr<ChildObject> kv;
    if (CalrtError* e = lookup(kvs(), args->kv, "CalrtKv", "Calrt_Kv_Clear_Args.kv", kv)) {
      return e;
    }
    // SDK: KV clear (zero the contents, fill level 0, keep the allocation).
    return sdk_unimplemented("Kv_Clear", "KV clear");
  });
}

CalrtError* kv_info(Calrt_Kv_Info_Args* args) noexcept {
  return guarded(args, CALRT_KV_INFO_ARGS_STRUCT_SIZE, "Calrt_Kv_Info_Args", [&] {
    std::shared_ptr<ChildObject> kv;
    if (CalrtError* e = lookup(kvs(), args->kv, "CalrtKv", "Calrt_Kv_Info_Args.kv", kv)) {
      return e;
    }
    // SDK: the KV handle's capacity and fill level.
    return sdk_unimplemented("Kv_Info", "the KV handle query");
  });
}

CalrtError* kv_capacity(Calrt_Kv_Capacity_Args* args) noexcept {
  return guarded(args, CALRT_KV_CAPACITY_ARGS_STRUCT_SIZE, "Calrt_Kv_Capacity_Args", [&] {
    std::shared_ptr<ChildObject> calbin;
    if (CalrtError* e = lookup(calbins(), args->calbin, "CalrtCalbin",
                               "Calrt_Kv_Capacity_Args.calbin", calbin)) {
      return e;
    }
    // SDK: the calbin's KV reservation (total, free, largest free, live handles).
    return sdk_unimplemented("Kv_Capacity", "the KV capacity query");
  });
}

// ---------------------------------------------------------------------------------------
// The table. Positional on purpose: it must follow CalrtApi's field order exactly, and the
// static_assert below catches a header that grew without a slot here.
// ---------------------------------------------------------------------------------------
constexpr CalrtApi kApi = {
    CALRT_API_STRUCT_SIZE,
    nullptr,  // no extensions: clock, trace, fault and diag are the simulator's
    CALRT_ABI_MAJOR,
    CALRT_ABI_MINOR,
    CALRT_ABI_PATCH,
    &error_destroy,
    &error_message,
    &error_get_code,
    &device_create,
    &device_destroy,
    &device_status,
    &device_chip_status,
    &device_reset,
    &device_set_parallel_mode,
    &calbin_create,
    &calbin_destroy,
    &calbin_get_info,
    &calbin_get_model,
    &calbin_get_tensor,
    &calbin_get_csr,
    &calbin_configure,
    &buffer_create,
    &buffer_destroy,
    &buffer_map,
    &buffer_unmap,
    &buffer_set_csr,
    &buffer_get_csr,
    &job_submit,
    &job_wait,
    &job_status,
    &job_cancel,
    &job_destroy,
    &kv_allocate,
    &kv_apply,
    &kv_free,
    &kv_clear,
    &kv_info,
    &kv_capacity,
};

static_assert(CALRT_API_STRUCT_SIZE == sizeof(CalrtApi), "CalrtApi grew: extend kApi");

}  // namespace

// The one exported symbol (CALRT_EXPORT; the library is built with hidden visibility).
// NULL for any other major: the loader then reports that this runtime does not serve it,
// instead of a caller misreading a table laid out for another major.
extern "C" CALRT_EXPORT const CalrtApi* CalrtGetApi(uint32_t abi_major) {
  return abi_major == CALRT_ABI_MAJOR ? &kApi : nullptr;
}
