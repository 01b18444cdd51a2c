// calrt.hpp: the header-only C++ wrapper over the CalRT Runtime ABI (calrt.h).
//
// Models: XRT's xrt::device / xrt::bo / xrt::run for the surface, the OpenXLA PJRT C++
// helpers for ownership. Every handle is a move-only owner (std::unique_ptr with a deleter
// per handle type), empty when default-constructed, with an explicit operator bool. Every
// C call that fails becomes a calrt::Error carrying the code and its fault class; the C
// error object is destroyed before the exception leaves the wrapper.
//
// An Api holds the runtime's function table through a shared_ptr, and every owner keeps a
// copy, so a runtime library stays loaded while any of its handles lives. A table entry
// that is NULL or lies beyond the table's struct_size is reported as CALRT_UNIMPLEMENTED,
// naming the function, instead of being called.
//
// Lifetimes follow calrt.h: destroying a Device invalidates its calbins, buffers, jobs and
// KV handles, so destroy children first (declaring them after the device does that).
// Destructors never throw; errors from Destroy/Free/Unmap calls made by a destructor are
// discarded, the explicit free()/unmap() methods report them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "abi/call_table.hpp"
#include "abi/calrt.h"

namespace calrt {

// ---------------------------------------------------------------------------------------
// Enumerations: the C values, scoped. Each mirrors a C enum value for value.
// ---------------------------------------------------------------------------------------
enum class FaultClass {
  request = CALRT_FAULT_REQUEST,
  model = CALRT_FAULT_MODEL,
  device = CALRT_FAULT_DEVICE
};
enum class DeviceKind { pcie = CALRT_DEVICE_PCIE, sim = CALRT_DEVICE_SIM };
enum class DeviceState { open = 1, configured, running, faulted, resetting, lost, count_ };
enum class ChipHealth { ok = 1, degraded, hung, failed, count_ };
enum class ModelType { prefill = 1, decode, kv_update, count_ };
enum class Direction { input = CALRT_INPUT, output = CALRT_OUTPUT };
enum class Dtype { int8 = 1, int32, bf16, f16, f32, int4, count_ };
enum class TensorRole { other = 0, token, position, logits, top_ids, top_logits, count_ };
enum class Layout { row_major = 1, tiled, count_ };
enum class JobState { submitted = 1, running, completed, failed, cancelled, timed_out, count_ };
enum class WaitResult { ready = CALRT_WAIT_READY, not_ready = CALRT_WAIT_NOT_READY };
enum class ResetLevel { job_abort = 1, cores, chip, full };

static_assert(static_cast<int>(DeviceState::count_) == CALRT_DEVICE_STATE_COUNT_);
static_assert(static_cast<int>(ChipHealth::count_) == CALRT_CHIP_HEALTH_COUNT_);
static_assert(static_cast<int>(ModelType::count_) == CALRT_MODEL_TYPE_COUNT_);
static_assert(static_cast<int>(Dtype::count_) == CALRT_DTYPE_COUNT_);
static_assert(static_cast<int>(TensorRole::count_) == CALRT_ROLE_COUNT_);
static_assert(static_cast<int>(Layout::count_) == CALRT_LAYOUT_COUNT_);
static_assert(static_cast<int>(JobState::count_) == CALRT_JOB_STATE_COUNT_);
static_assert(static_cast<int>(ResetLevel::full) + 1 == CALRT_RESET_LEVEL_COUNT_);

// "KV_EXHAUSTED" for CALRT_KV_EXHAUSTED; "code 0x...": an unknown code.
inline std::string code_name(CalrtCode code) {
  switch (code) {
#define CALRT_HPP_CODE(name) \
  case CALRT_##name:         \
    return #name
    CALRT_HPP_CODE(OK);
    CALRT_HPP_CODE(INVALID_ARGUMENT);
    CALRT_HPP_CODE(INVALID_HANDLE);
    CALRT_HPP_CODE(NOT_FOUND);
    CALRT_HPP_CODE(OUT_OF_RANGE);
    CALRT_HPP_CODE(KV_EXHAUSTED);
    CALRT_HPP_CODE(BUSY);
    CALRT_HPP_CODE(WRONG_STATE);
    CALRT_HPP_CODE(CANCELLED);
    CALRT_HPP_CODE(STRUCT_TOO_SMALL);
    CALRT_HPP_CODE(UNIMPLEMENTED);
    CALRT_HPP_CODE(BUFFER_REUSE);
    CALRT_HPP_CODE(PERMISSION_DENIED);
    CALRT_HPP_CODE(PREEMPTED);
    CALRT_HPP_CODE(CALBIN_INVALID);
    CALRT_HPP_CODE(CALBIN_MISMATCH);
    CALRT_HPP_CODE(NOT_CONFIGURED);
    CALRT_HPP_CODE(OUT_OF_DEVICE_MEMORY);
    CALRT_HPP_CODE(DMA_ERROR);
    CALRT_HPP_CODE(DEVICE_HUNG);
    CALRT_HPP_CODE(DEVICE_LOST);
    CALRT_HPP_CODE(FIRMWARE_CRASH);
    CALRT_HPP_CODE(ECC_UNCORRECTABLE);
    CALRT_HPP_CODE(D2D_LINK_DOWN);
    CALRT_HPP_CODE(INTERNAL);
#undef CALRT_HPP_CODE
  }
  return "code " + std::to_string(static_cast<uint32_t>(code));
}

// The fault class a code belongs to. A code outside the three classes (a runtime bug) is
// treated as a device fault: the conservative reaction is a reset.
inline FaultClass fault_class_of(CalrtCode code) {
  switch (CALRT_CODE_FAULT_CLASS(code)) {
    case CALRT_FAULT_REQUEST:
      return FaultClass::request;
    case CALRT_FAULT_MODEL:
      return FaultClass::model;
    default:
      return FaultClass::device;
  }
}

inline const char* to_string(FaultClass fault) {
  switch (fault) {
    case FaultClass::request:
      return "request";
    case FaultClass::model:
      return "model";
    case FaultClass::device:
      return "device";
  }
  return "?";
}

inline const char* to_string(DeviceState state) {
  constexpr const char* kNames[] = {"?",       "OPEN",      "CONFIGURED", "RUNNING",
                                    "FAULTED", "RESETTING", "LOST"};
  const auto index = static_cast<size_t>(state);
  return index < std::size(kNames) ? kNames[index] : "?";
}

inline const char* to_string(ChipHealth health) {
  constexpr const char* kNames[] = {"?", "OK", "DEGRADED", "HUNG", "FAILED"};
  const auto index = static_cast<size_t>(health);
  return index < std::size(kNames) ? kNames[index] : "?";
}

inline const char* to_string(ModelType type) {
  constexpr const char* kNames[] = {"?", "prefill", "decode", "kv_update"};
  const auto index = static_cast<size_t>(type);
  return index < std::size(kNames) ? kNames[index] : "?";
}

inline const char* to_string(Dtype dtype) {
  constexpr const char* kNames[] = {"?", "int8", "int32", "bf16", "f16", "f32", "int4"};
  const auto index = static_cast<size_t>(dtype);
  return index < std::size(kNames) ? kNames[index] : "?";
}

inline const char* to_string(TensorRole role) {
  constexpr const char* kNames[] = {"other",  "token",   "position",
                                    "logits", "top_ids", "top_logits"};
  const auto index = static_cast<size_t>(role);
  return index < std::size(kNames) ? kNames[index] : "?";
}

inline const char* to_string(Layout layout) {
  return layout == Layout::tiled ? "tiled" : layout == Layout::row_major ? "row_major" : "?";
}

inline const char* to_string(JobState state) {
  constexpr const char* kNames[] = {"?",      "SUBMITTED", "RUNNING",  "COMPLETED",
                                    "FAILED", "CANCELLED", "TIMED_OUT"};
  const auto index = static_cast<size_t>(state);
  return index < std::size(kNames) ? kNames[index] : "?";
}

// ---------------------------------------------------------------------------------------
// Errors.
// ---------------------------------------------------------------------------------------

// A failed CalRT call. what() reads "Function: CODE (fault class): runtime message".
class Error : public std::runtime_error {
 public:
  Error(CalrtCode code, std::string_view function, std::string message)
      : std::runtime_error(std::string(function) + ": " + code_name(code) + " (" +
                           to_string(fault_class_of(code)) + "): " + message),
        code_(code),
        function_(function),
        message_(std::move(message)) {}

  CalrtCode code() const noexcept { return code_; }
  FaultClass fault_class() const noexcept { return fault_class_of(code_); }
  // The C function that failed, e.g. "Kv_Allocate".
  const std::string& function() const noexcept { return function_; }
  // The runtime's own message, without the prefix what() adds.
  const std::string& message() const noexcept { return message_; }

 private:
  CalrtCode code_;
  std::string function_;
  std::string message_;
};

// An entry the runtime's table does not reach: the runtime implements an older minor
// version of calrt.h, which calrt.h allows. Still UNIMPLEMENTED, so that catching Error
// keeps working; callers that must tell "older minor" from "declined" catch this first.
class EntryBeyondTable : public Error {
 public:
  using Error::Error;
};

// ---------------------------------------------------------------------------------------
// Timeouts. A std::chrono duration; zero is the runtime's bounded default
// (CALRT_TIMEOUT_DEFAULT), duration::max() is an explicit infinite wait. There is no
// "poll": pass 1 ns for that.
// ---------------------------------------------------------------------------------------
using Timeout = std::chrono::nanoseconds;
inline constexpr Timeout kDefaultTimeout{0};
inline constexpr Timeout kInfiniteTimeout = Timeout::max();

inline uint64_t to_timeout_ns(Timeout timeout, std::string_view function) {
  if (timeout == kInfiniteTimeout) {
    return CALRT_TIMEOUT_INFINITE;
  }
  if (timeout < Timeout::zero()) {
    throw Error(CALRT_INVALID_ARGUMENT, function,
                "negative timeout " + std::to_string(timeout.count()) + " ns");
  }
  return static_cast<uint64_t>(timeout.count());
}

// ---------------------------------------------------------------------------------------
// Args structs: zero-initialised, struct_size set from the header's macro.
// ---------------------------------------------------------------------------------------
namespace detail {

// What a caller compiled against this header puts in struct_size: the end of the struct's
// last field, from the call table (call_table.hpp checks that the table lists every field).
template <class T>
inline constexpr size_t kStructSize = 0;
template <calls::AbiCall T>
inline constexpr size_t kStructSize<T> = calls::CallInfo<T>::struct_size;
template <>
inline constexpr size_t kStructSize<CalrtApi> = CALRT_API_STRUCT_SIZE;

// A zero-initialised args struct of type T with struct_size set for this header.
template <class T>
T make_args() {
  static_assert(kStructSize<T> != 0, "no CALRT_*_STRUCT_SIZE registered for this type");
  T args{};
  args.struct_size = kStructSize<T>;
  return args;
}

// Range-checks an enum value a runtime returned, so that a buggy runtime shows up as an
// error instead of as an out-of-range enum in the caller's switch.
template <class E>
E checked_enum(int value, int first, E count, std::string_view function, std::string_view what) {
  if (value < first || value >= static_cast<int>(count)) {
    throw Error(CALRT_INTERNAL, function,
                "runtime returned " + std::string(what) + " " + std::to_string(value) +
                    ", outside [" + std::to_string(first) + ", " +
                    std::to_string(static_cast<int>(count)) + ")");
  }
  return static_cast<E>(value);
}

inline std::string string_or_empty(const char* text) { return text ? std::string(text) : ""; }

// The integer in an enum field a runtime filled. Read through the object representation:
// loading an out-of-range value as the enum type itself would be undefined behaviour, and a
// buggy runtime is exactly what the range checks are for.
template <class E>
int raw_enum(const E& field) {
  std::underlying_type_t<E> value;
  std::memcpy(&value, &field, sizeof(value));
  return static_cast<int>(value);
}

// A status code a runtime returned. Codes unknown to this header but inside the three
// fault-class ranges (a newer minor version) are kept; anything else becomes INTERNAL.
inline CalrtCode checked_code(const CalrtCode& field) {
  const int value = raw_enum(field);
  return value >= 0 && value < 0x400 ? static_cast<CalrtCode>(value) : CALRT_INTERNAL;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// Api: a runtime's function table, shared by every object created through it.
// ---------------------------------------------------------------------------------------
class Api {
 public:
  Api() = default;
  // Wraps a table. `keepalive` owns whatever keeps the table valid (the loader passes the
  // dlopen handle); it may be empty for a table in static storage. The table is not
  // validated here: calrt_loader.hpp's validate_table() does that.
  explicit Api(const CalrtApi* table, std::shared_ptr<const void> keepalive = {})
      : table_(std::move(keepalive), table) {}

  explicit operator bool() const noexcept { return table_ != nullptr; }
  const CalrtApi* table() const noexcept { return table_.get(); }

  // The entry at `offset` in the table (use CALRT_HPP_ENTRY), or CALRT_UNIMPLEMENTED
  // naming `function` when the entry is NULL or beyond the table's struct_size. The offset
  // is checked before the entry is read: a smaller (older) table may end before it.
  template <class Fn>
  Fn* entry(size_t offset, std::string_view function) const {
    if (!table_) {
      throw Error(CALRT_UNIMPLEMENTED, function, "no runtime table (empty calrt::Api)");
    }
    if (offset + sizeof(Fn*) > table_->struct_size) {
      throw EntryBeyondTable(CALRT_UNIMPLEMENTED, function,
                             "not provided by the runtime: its table's struct_size " +
                                 std::to_string(table_->struct_size) + " ends before this entry");
    }
    Fn* fn = nullptr;
    std::memcpy(&fn, reinterpret_cast<const char*>(table_.get()) + offset, sizeof(fn));
    if (fn == nullptr) {
      throw Error(CALRT_UNIMPLEMENTED, function, "not provided by the runtime (NULL entry)");
    }
    return fn;
  }

  // Converts a returned C error into calrt::Error (destroying the C error) and throws it.
  void check(CalrtError* error, std::string_view function) const {
    if (error == nullptr) {
      return;
    }
    CalrtCode code = CALRT_INTERNAL;
    std::string message = "(the runtime's error could not be read)";
    try {
      auto code_args = detail::make_args<Calrt_Error_GetCode_Args>();
      code_args.error = error;
      entry<Calrt_Error_GetCode>(offsetof(CalrtApi, Error_GetCode), "Error_GetCode")(&code_args);
      code = detail::checked_code(code_args.code);
      auto message_args = detail::make_args<Calrt_Error_Message_Args>();
      message_args.error = error;
      entry<Calrt_Error_Message>(offsetof(CalrtApi, Error_Message), "Error_Message")(&message_args);
      if (message_args.message != nullptr) {
        message.assign(message_args.message, message_args.message_size);
      }
    } catch (const Error&) {
      // A table without the error accessors: keep the generic code and message.
    }
    if (code == CALRT_OK) {  // a runtime bug: an error object that says "no error"
      code = CALRT_INTERNAL;
      message = "runtime returned an error object with code OK: " + message;
    }
    discard(error);
    throw Error(code, function, std::move(message));
  }

  // Destroys a C error without looking at it (used by destructors, which cannot throw).
  void discard(CalrtError* error) const noexcept {
    if (error == nullptr) {
      return;
    }
    try {
      auto args = detail::make_args<Calrt_Error_Destroy_Args>();
      args.error = error;
      entry<Calrt_Error_Destroy>(offsetof(CalrtApi, Error_Destroy), "Error_Destroy")(&args);
    } catch (const Error&) {
      // No Error_Destroy: the error leaks; nothing else is possible.
    }
  }

  // Frees a raw KV handle (wraps Kv_Free). For conformance checks that must hand the
  // runtime a handle it already released (double free); normal code uses Kv::free().
  void kv_free_raw(CalrtKv* kv) const;

 private:
  std::shared_ptr<const CalrtApi> table_;
};

// The entry `field` of an Api's table, typed, or CALRT_UNIMPLEMENTED.
#define CALRT_HPP_ENTRY(api, field) \
  (api).template entry<Calrt_##field>(offsetof(CalrtApi, field), #field)
// Calls entry `field` with `args` and throws on error.
#define CALRT_HPP_CALL(api, field, args) (api).check(CALRT_HPP_ENTRY(api, field)(&(args)), #field)

inline void Api::kv_free_raw(CalrtKv* kv) const {
  auto args = detail::make_args<Calrt_Kv_Free_Args>();
  args.kv = kv;
  CALRT_HPP_CALL(*this, Kv_Free, args);
}

namespace detail {

// What a deleter needs to know about one handle type: its Destroy/Free entry and args.
#define CALRT_HPP_HANDLE(Traits, HandleType, Field, Member)               \
  struct Traits {                                                         \
    using Handle = HandleType;                                            \
    using Args = Calrt_##Field##_Args;                                    \
    using Fn = Calrt_##Field;                                             \
    static constexpr size_t kOffset = offsetof(CalrtApi, Field);          \
    static constexpr const char* kName = #Field;                          \
    static void set(Args& args, Handle* handle) { args.Member = handle; } \
  };
CALRT_HPP_HANDLE(DeviceTraits, CalrtDevice, Device_Destroy, device)
CALRT_HPP_HANDLE(CalbinTraits, CalrtCalbin, Calbin_Destroy, calbin)
CALRT_HPP_HANDLE(BufferTraits, CalrtBuffer, Buffer_Destroy, buffer)
CALRT_HPP_HANDLE(JobTraits, CalrtJob, Job_Destroy, job)
CALRT_HPP_HANDLE(KvTraits, CalrtKv, Kv_Free, kv)
#undef CALRT_HPP_HANDLE

// Releases one handle through its Destroy/Free entry.
template <class Traits>
struct HandleDeleter {
  Api api;
  // Releases the handle and returns the runtime's error (throws UNIMPLEMENTED if the
  // runtime has no such entry).
  CalrtError* release(typename Traits::Handle* handle) const {
    auto args = make_args<typename Traits::Args>();
    Traits::set(args, handle);
    return api.entry<typename Traits::Fn>(Traits::kOffset, Traits::kName)(&args);
  }
  void operator()(typename Traits::Handle* handle) const noexcept {
    try {
      api.discard(release(handle));
    } catch (const Error&) {
      // The runtime has no Destroy entry: nothing can release the handle.
    }
  }
};

// Unmaps one tensor of a buffer (the buffer itself is not owned by the mapping).
struct UnmapDeleter {
  Api api;
  uint32_t tensor_index = 0;
  CalrtError* release(CalrtBuffer* buffer) const {
    auto args = make_args<Calrt_Buffer_Unmap_Args>();
    args.buffer = buffer;
    args.tensor_index = tensor_index;
    return CALRT_HPP_ENTRY(api, Buffer_Unmap)(&args);
  }
  void operator()(CalrtBuffer* buffer) const noexcept {
    try {
      api.discard(release(buffer));
    } catch (const Error&) {
    }
  }
};

// Common part of the owners: the handle and the Api that created it.
template <class Handle, class Deleter>
class Owner {
 public:
  Owner() = default;
  // Adopts a raw handle created through `api`.
  Owner(Handle* handle, Deleter deleter) : handle_(handle, std::move(deleter)) {}

  explicit operator bool() const noexcept { return handle_ != nullptr; }
  Handle* get() const noexcept { return handle_.get(); }
  const Api& api() const noexcept { return handle_.get_deleter().api; }
  // Gives up ownership without releasing the handle.
  Handle* release() noexcept { return handle_.release(); }

 protected:
  // The handle, or INVALID_HANDLE for a call on an empty (default or moved-from) owner.
  Handle* checked(std::string_view function) const {
    if (!handle_) {
      throw Error(CALRT_INVALID_HANDLE, function, "called on an empty (moved-from) object");
    }
    return handle_.get();
  }
  // Releases the handle now and reports the runtime's error; *this is empty afterwards
  // whatever happens, since a failed Destroy leaves nothing the caller could retry.
  void close(std::string_view function) {
    Handle* handle = checked(function);
    const Deleter deleter = handle_.get_deleter();
    handle_.release();
    deleter.api.check(deleter.release(handle), function);
  }

 private:
  std::unique_ptr<Handle, Deleter> handle_;
};

}  // namespace detail

// ---------------------------------------------------------------------------------------
// Device.
// ---------------------------------------------------------------------------------------

// Device_Status, converted.
struct DeviceStatus {
  DeviceState state = DeviceState::open;
  std::string runtime_version;
  std::string firmware_version;
  std::string driver_version;
  std::string device_name;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  uint32_t abi_patch = 0;
  uint32_t chip_count = 0;
  bool parallel_mode = false;
  uint64_t error_count = 0;  // device-class faults since open
  uint64_t reset_count = 0;
  std::chrono::nanoseconds device_time{0};  // the device clock (virtual for the simulator)
  CalrtCode last_error = CALRT_OK;
};

// Device_ChipStatus, converted.
struct ChipStatus {
  uint32_t chip = 0;
  ChipHealth health = ChipHealth::ok;
  uint64_t dram_total_bytes = 0;
  uint64_t dram_used_bytes = 0;
  uint64_t ecc_corrected = 0;
  uint64_t ecc_uncorrected = 0;
  std::chrono::nanoseconds busy_time{0};
};

class Device : public detail::Owner<CalrtDevice, detail::HandleDeleter<detail::DeviceTraits>> {
 public:
  using Owner::Owner;

  // Opens a device (Device_Create). An empty config means the runtime's defaults.
  static Device create(const Api& api, DeviceKind kind, uint32_t index = 0,
                       const std::string& config = {}, Timeout timeout = kDefaultTimeout) {
    auto args = detail::make_args<Calrt_Device_Create_Args>();
    args.kind = static_cast<CalrtDeviceKind>(kind);
    args.index = index;
    args.config = config.empty() ? nullptr : config.c_str();
    args.timeout_ns = to_timeout_ns(timeout, "Device_Create");
    CALRT_HPP_CALL(api, Device_Create, args);
    return Device(args.device, {api});
  }

  // State, versions and counters (Device_Status).
  DeviceStatus status() const {
    auto args = detail::make_args<Calrt_Device_Status_Args>();
    args.device = checked("Device_Status");
    CALRT_HPP_CALL(api(), Device_Status, args);
    DeviceStatus out;
    out.state = detail::checked_enum(detail::raw_enum(args.state), 1, DeviceState::count_,
                                     "Device_Status", "device state");
    out.runtime_version = detail::string_or_empty(args.runtime_version);
    out.firmware_version = detail::string_or_empty(args.firmware_version);
    out.driver_version = detail::string_or_empty(args.driver_version);
    out.device_name = detail::string_or_empty(args.device_name);
    out.abi_major = args.abi_major;
    out.abi_minor = args.abi_minor;
    out.abi_patch = args.abi_patch;
    out.chip_count = args.chip_count;
    out.parallel_mode = args.parallel_mode != 0;
    out.error_count = args.error_count;
    out.reset_count = args.reset_count;
    out.device_time = std::chrono::nanoseconds(static_cast<int64_t>(args.device_time_ns));
    out.last_error = detail::checked_code(args.last_error);
    return out;
  }

  // One chip's health and memory (Device_ChipStatus).
  ChipStatus chip_status(uint32_t chip) const {
    auto args = detail::make_args<Calrt_Device_ChipStatus_Args>();
    args.device = checked("Device_ChipStatus");
    args.chip = chip;
    CALRT_HPP_CALL(api(), Device_ChipStatus, args);
    ChipStatus out;
    out.chip = chip;
    out.health = detail::checked_enum(detail::raw_enum(args.health), 1, ChipHealth::count_,
                                      "Device_ChipStatus", "chip health");
    out.dram_total_bytes = args.dram_total_bytes;
    out.dram_used_bytes = args.dram_used_bytes;
    out.ecc_corrected = args.ecc_corrected;
    out.ecc_uncorrected = args.ecc_uncorrected;
    out.busy_time = std::chrono::nanoseconds(static_cast<int64_t>(args.busy_time_ns));
    return out;
  }

  // Resets the device (Device_Reset); returns the state after the reset.
  DeviceState reset(ResetLevel level, Timeout timeout = kDefaultTimeout) {
    auto args = detail::make_args<Calrt_Device_Reset_Args>();
    args.device = checked("Device_Reset");
    args.level = static_cast<CalrtResetLevel>(level);
    args.timeout_ns = to_timeout_ns(timeout, "Device_Reset");
    CALRT_HPP_CALL(api(), Device_Reset, args);
    return detail::checked_enum(detail::raw_enum(args.state), 1, DeviceState::count_,
                                "Device_Reset", "device state");
  }

  // Turns parallel (ping/pong) mode on or off (Device_SetParallelMode).
  void set_parallel_mode(bool enable) {
    auto args = detail::make_args<Calrt_Device_SetParallelMode_Args>();
    args.device = checked("Device_SetParallelMode");
    args.enable = enable ? 1u : 0u;
    CALRT_HPP_CALL(api(), Device_SetParallelMode, args);
  }

  // Closes the device now, reporting errors (Device_Destroy); *this becomes empty.
  void destroy() { close("Device_Destroy"); }
};

// ---------------------------------------------------------------------------------------
// Calbin.
// ---------------------------------------------------------------------------------------

// Calbin_GetInfo, converted.
struct CalbinInfo {
  std::string calbin_version;
  std::string architecture;
  std::string runtime_abi;
  uint32_t model_count = 0;
  uint32_t chip_count = 0;
  uint32_t vocab = 0;
  uint32_t context = 0;
  uint32_t batch = 0;
  uint32_t layers = 0;
  uint32_t hidden = 0;
  uint32_t q_heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t prefill_chunk = 0;
  Dtype kv_dtype = Dtype::bf16;
  bool configured = false;
};

// One input or output tensor of a model (Calbin_GetTensor), converted.
struct TensorDesc {
  std::string name;
  Direction direction = Direction::input;
  uint32_t index = 0;  // within the model's inputs or outputs
  TensorRole role = TensorRole::other;
  Dtype dtype = Dtype::int32;
  std::vector<int64_t> shape;  // logical, outermost first
  Layout layout = Layout::row_major;
  uint32_t tile_d0 = 0;  // > 0 only for Layout::tiled
  uint64_t bytes = 0;    // in the buffer, tiling padding included
  uint64_t device_address = 0;
  uint32_t chip_mask = 0;
};

// One control/status register of a model (Calbin_GetCsr), converted.
struct CsrDesc {
  std::string name;
  uint32_t index = 0;
  uint64_t address = 0;
};

// One model (Calbin_GetModel) with its tensors and CSRs.
struct ModelDesc {
  std::string name;
  ModelType type = ModelType::prefill;
  uint32_t index = 0;
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  std::vector<CsrDesc> csrs;

  // The first tensor of that direction and role, or nullptr.
  const TensorDesc* find_tensor(Direction direction, TensorRole role) const {
    for (const TensorDesc& tensor : direction == Direction::input ? inputs : outputs) {
      if (tensor.role == role) {
        return &tensor;
      }
    }
    return nullptr;
  }
  // The CSR with exactly this name, or nullptr.
  const CsrDesc* find_csr(std::string_view csr_name) const {
    for (const CsrDesc& csr : csrs) {
      if (csr.name == csr_name) {
        return &csr;
      }
    }
    return nullptr;
  }
};

// Calbin_Configure, converted.
struct ConfigureResult {
  std::chrono::nanoseconds configure_time{0};  // device time
  std::vector<uint64_t> memory_used_bytes;     // per chip, this calbin only
};

// Kv_Capacity, converted.
struct KvCapacity {
  uint64_t total_tokens = 0;
  uint64_t free_tokens = 0;
  uint64_t largest_free_tokens = 0;
  uint64_t bytes_per_token_per_chip = 0;
  uint32_t live_handles = 0;
};

class Calbin : public detail::Owner<CalrtCalbin, detail::HandleDeleter<detail::CalbinTraits>> {
 public:
  using Owner::Owner;

  // Loads and verifies a calbin directory (Calbin_Create).
  static Calbin create(const Device& device, const std::filesystem::path& path,
                       Timeout timeout = kDefaultTimeout) {
    auto args = detail::make_args<Calrt_Calbin_Create_Args>();
    if (!device) {
      throw Error(CALRT_INVALID_HANDLE, "Calbin_Create", "empty calrt::Device");
    }
    const std::string path_text = path.string();
    args.device = device.get();
    args.path = path_text.c_str();
    args.timeout_ns = to_timeout_ns(timeout, "Calbin_Create");
    CALRT_HPP_CALL(device.api(), Calbin_Create, args);
    return Calbin(args.calbin, {device.api()});
  }

  // Version and LLM info (Calbin_GetInfo).
  CalbinInfo info() const {
    auto args = detail::make_args<Calrt_Calbin_GetInfo_Args>();
    args.calbin = checked("Calbin_GetInfo");
    CALRT_HPP_CALL(api(), Calbin_GetInfo, args);
    CalbinInfo out;
    out.calbin_version = detail::string_or_empty(args.calbin_version);
    out.architecture = detail::string_or_empty(args.architecture);
    out.runtime_abi = detail::string_or_empty(args.runtime_abi);
    out.model_count = args.model_count;
    out.chip_count = args.chip_count;
    out.vocab = args.vocab;
    out.context = args.context;
    out.batch = args.batch;
    out.layers = args.layers;
    out.hidden = args.hidden;
    out.q_heads = args.q_heads;
    out.kv_heads = args.kv_heads;
    out.head_dim = args.head_dim;
    out.prefill_chunk = args.prefill_chunk;
    out.kv_dtype = detail::checked_enum(detail::raw_enum(args.kv_dtype), 1, Dtype::count_,
                                        "Calbin_GetInfo", "kv dtype");
    out.configured = args.configured != 0;
    return out;
  }

  // Model number model_index with its tensors and CSRs (Calbin_GetModel, then
  // Calbin_GetTensor and Calbin_GetCsr for each of them, by the model's exact name).
  ModelDesc model(uint32_t model_index) const {
    auto args = detail::make_args<Calrt_Calbin_GetModel_Args>();
    args.calbin = checked("Calbin_GetModel");
    args.model_index = model_index;
    CALRT_HPP_CALL(api(), Calbin_GetModel, args);
    ModelDesc out;
    out.name = detail::string_or_empty(args.name);
    out.type = detail::checked_enum(detail::raw_enum(args.type), 1, ModelType::count_,
                                    "Calbin_GetModel", "model type");
    out.index = model_index;
    for (uint32_t i = 0; i < args.input_count; ++i) {
      out.inputs.push_back(tensor(out.name, Direction::input, i));
    }
    for (uint32_t i = 0; i < args.output_count; ++i) {
      out.outputs.push_back(tensor(out.name, Direction::output, i));
    }
    for (uint32_t i = 0; i < args.csr_count; ++i) {
      out.csrs.push_back(csr(out.name, i));
    }
    return out;
  }

  // Every model, in the calbin's order.
  std::vector<ModelDesc> models() const {
    std::vector<ModelDesc> out;
    const uint32_t count = info().model_count;
    for (uint32_t i = 0; i < count; ++i) {
      out.push_back(model(i));
    }
    return out;
  }

  // One tensor of the model named exactly model_name (Calbin_GetTensor).
  TensorDesc tensor(const std::string& model_name, Direction direction, uint32_t index) const {
    auto args = detail::make_args<Calrt_Calbin_GetTensor_Args>();
    args.calbin = checked("Calbin_GetTensor");
    args.model_name = model_name.c_str();
    args.direction = static_cast<CalrtDirection>(direction);
    args.index = index;
    CALRT_HPP_CALL(api(), Calbin_GetTensor, args);
    if (args.rank > CALRT_MAX_RANK) {
      throw Error(CALRT_INTERNAL, "Calbin_GetTensor",
                  "runtime returned rank " + std::to_string(args.rank) + " for tensor " +
                      detail::string_or_empty(args.name) + " of model " + model_name);
    }
    TensorDesc out;
    out.name = detail::string_or_empty(args.name);
    out.direction = direction;
    out.index = index;
    out.role = detail::checked_enum(detail::raw_enum(args.role), 0, TensorRole::count_,
                                    "Calbin_GetTensor", "tensor role");
    out.dtype = detail::checked_enum(detail::raw_enum(args.dtype), 1, Dtype::count_,
                                     "Calbin_GetTensor", "dtype");
    out.shape.assign(args.dims, args.dims + args.rank);
    out.layout = detail::checked_enum(detail::raw_enum(args.layout), 1, Layout::count_,
                                      "Calbin_GetTensor", "layout");
    out.tile_d0 = args.tile_d0;
    out.bytes = args.size_bytes;
    out.device_address = args.device_address;
    out.chip_mask = args.chip_mask;
    return out;
  }

  // One CSR of the model named exactly model_name (Calbin_GetCsr).
  CsrDesc csr(const std::string& model_name, uint32_t index) const {
    auto args = detail::make_args<Calrt_Calbin_GetCsr_Args>();
    args.calbin = checked("Calbin_GetCsr");
    args.model_name = model_name.c_str();
    args.index = index;
    CALRT_HPP_CALL(api(), Calbin_GetCsr, args);
    return CsrDesc{detail::string_or_empty(args.name), index, args.address};
  }

  // Places the calbin on the device (Calbin_Configure).
  ConfigureResult configure(Timeout timeout = kDefaultTimeout) {
    auto args = detail::make_args<Calrt_Calbin_Configure_Args>();
    args.calbin = checked("Calbin_Configure");
    args.timeout_ns = to_timeout_ns(timeout, "Calbin_Configure");
    CALRT_HPP_CALL(api(), Calbin_Configure, args);
    if (args.chip_count > CALRT_MAX_CHIPS) {
      throw Error(CALRT_INTERNAL, "Calbin_Configure",
                  "runtime returned chip_count " + std::to_string(args.chip_count));
    }
    ConfigureResult out;
    out.configure_time = std::chrono::nanoseconds(static_cast<int64_t>(args.configure_time_ns));
    out.memory_used_bytes.assign(args.memory_used_bytes, args.memory_used_bytes + args.chip_count);
    return out;
  }

  // The KV reservation's state (Kv_Capacity).
  KvCapacity kv_capacity() const {
    auto args = detail::make_args<Calrt_Kv_Capacity_Args>();
    args.calbin = checked("Kv_Capacity");
    CALRT_HPP_CALL(api(), Kv_Capacity, args);
    return KvCapacity{args.total_tokens, args.free_tokens, args.largest_free_tokens,
                      args.bytes_per_token_per_chip, args.live_handles};
  }

  // Unloads the calbin now, reporting errors (Calbin_Destroy); *this becomes empty.
  void destroy() { close("Calbin_Destroy"); }
};

// ---------------------------------------------------------------------------------------
// Buffers and mappings.
// ---------------------------------------------------------------------------------------

// One mapped tensor of a buffer; unmaps on destruction (Buffer_Unmap). Does not own the
// buffer: destroy the mapping before the buffer.
class Mapping : public detail::Owner<CalrtBuffer, detail::UnmapDeleter> {
 public:
  Mapping() = default;
  Mapping(CalrtBuffer* buffer, detail::UnmapDeleter deleter, void* data, uint64_t size)
      : Owner(buffer, std::move(deleter)), data_(data), size_(size) {}

  std::span<std::byte> bytes() const noexcept {
    return {static_cast<std::byte*>(data_), static_cast<size_t>(size_)};
  }
  uint64_t size() const noexcept { return size_; }
  // The mapped bytes as elements of T; INVALID_ARGUMENT if the size or the alignment does
  // not fit T.
  template <class T>
  std::span<T> as() const {
    if (size_ % sizeof(T) != 0 || reinterpret_cast<uintptr_t>(data_) % alignof(T) != 0) {
      throw Error(CALRT_INVALID_ARGUMENT, "Buffer_Map",
                  "mapping of " + std::to_string(size_) + " bytes is not an array of " +
                      std::to_string(sizeof(T)) + "-byte elements");
    }
    return {static_cast<T*>(data_), static_cast<size_t>(size_ / sizeof(T))};
  }
  // Unmaps now, reporting errors (Buffer_Unmap); *this becomes empty.
  void unmap() {
    close("Buffer_Unmap");
    data_ = nullptr;
    size_ = 0;
  }

 private:
  void* data_ = nullptr;
  uint64_t size_ = 0;
};

class Buffer : public detail::Owner<CalrtBuffer, detail::HandleDeleter<detail::BufferTraits>> {
 public:
  using Owner::Owner;

  // The input or output buffer of the model named exactly model_name (Buffer_Create).
  static Buffer create(const Calbin& calbin, const std::string& model_name, Direction direction,
                       uint32_t slot = 0) {
    if (!calbin) {
      throw Error(CALRT_INVALID_HANDLE, "Buffer_Create", "empty calrt::Calbin");
    }
    auto args = detail::make_args<Calrt_Buffer_Create_Args>();
    args.calbin = calbin.get();
    args.model_name = model_name.c_str();
    args.direction = static_cast<CalrtDirection>(direction);
    args.slot = slot;
    CALRT_HPP_CALL(calbin.api(), Buffer_Create, args);
    return Buffer(args.buffer, {calbin.api()});
  }

  // Maps one tensor into host memory (Buffer_Map); the Mapping unmaps it.
  Mapping map(uint32_t tensor_index, Timeout timeout = kDefaultTimeout) {
    auto args = detail::make_args<Calrt_Buffer_Map_Args>();
    args.buffer = checked("Buffer_Map");
    args.tensor_index = tensor_index;
    args.timeout_ns = to_timeout_ns(timeout, "Buffer_Map");
    CALRT_HPP_CALL(api(), Buffer_Map, args);
    return Mapping(get(), detail::UnmapDeleter{api(), tensor_index}, args.data, args.size_bytes);
  }

  // Sets a CSR of an input buffer (Buffer_SetCsr).
  void set_csr(uint32_t csr_index, uint64_t value) {
    auto args = detail::make_args<Calrt_Buffer_SetCsr_Args>();
    args.buffer = checked("Buffer_SetCsr");
    args.csr_index = csr_index;
    args.value = value;
    CALRT_HPP_CALL(api(), Buffer_SetCsr, args);
  }

  // Reads a CSR of an input buffer (Buffer_GetCsr).
  uint64_t csr(uint32_t csr_index) const {
    auto args = detail::make_args<Calrt_Buffer_GetCsr_Args>();
    args.buffer = checked("Buffer_GetCsr");
    args.csr_index = csr_index;
    CALRT_HPP_CALL(api(), Buffer_GetCsr, args);
    return args.value;
  }

  // Releases the buffer now, reporting errors (Buffer_Destroy); *this becomes empty.
  void destroy() { close("Buffer_Destroy"); }
};

// ---------------------------------------------------------------------------------------
// Jobs.
// ---------------------------------------------------------------------------------------

// Job_Status, converted. A job that failed reports its code; a wait that timed out does not
// make the job failed (that is WaitResult::not_ready).
struct JobStatus {
  JobState state = JobState::submitted;
  CalrtCode code = CALRT_OK;  // why the job failed or was cancelled
  std::string message;
  std::chrono::nanoseconds submit_time{0};  // device clock
  std::chrono::nanoseconds start_time{0};   // 0 until started
  std::chrono::nanoseconds end_time{0};     // 0 until final
  // Profiling; 0 until reached, or when the runtime cannot tell.
  std::chrono::nanoseconds h2d_end_time{0};
  std::chrono::nanoseconds compute_end_time{0};
  std::chrono::nanoseconds compute_start_time{0};

  bool is_final() const noexcept {
    return calrt_job_state_final(static_cast<uint32_t>(state)) != 0;
  }
  FaultClass fault_class() const noexcept { return fault_class_of(code); }
};

class Job : public detail::Owner<CalrtJob, detail::HandleDeleter<detail::JobTraits>> {
 public:
  using Owner::Owner;

  // Submits one execution of the model named exactly model_name (Job_Submit).
  static Job submit(const Calbin& calbin, const std::string& model_name, const Buffer& input,
                    const Buffer& output) {
    if (!calbin || !input || !output) {
      throw Error(CALRT_INVALID_HANDLE, "Job_Submit", "empty calbin or buffer");
    }
    auto args = detail::make_args<Calrt_Job_Submit_Args>();
    args.calbin = calbin.get();
    args.model_name = model_name.c_str();
    args.input = input.get();
    args.output = output.get();
    CALRT_HPP_CALL(calbin.api(), Job_Submit, args);
    return Job(args.job, {calbin.api()});
  }

  // Waits at most `timeout` for a final state (Job_Wait). not_ready means the timeout
  // passed with the job still in flight; ready means final, and status() tells which.
  WaitResult wait(Timeout timeout = kDefaultTimeout) {
    auto args = detail::make_args<Calrt_Job_Wait_Args>();
    args.job = checked("Job_Wait");
    args.timeout_ns = to_timeout_ns(timeout, "Job_Wait");
    CALRT_HPP_CALL(api(), Job_Wait, args);
    const int result = detail::raw_enum(args.result);
    if (result != CALRT_WAIT_READY && result != CALRT_WAIT_NOT_READY) {
      throw Error(CALRT_INTERNAL, "Job_Wait",
                  "runtime returned wait result " + std::to_string(result));
    }
    return static_cast<WaitResult>(result);
  }

  // State, failure and device timestamps (Job_Status). Never blocks.
  JobStatus status() const {
    auto args = detail::make_args<Calrt_Job_Status_Args>();
    args.job = checked("Job_Status");
    CALRT_HPP_CALL(api(), Job_Status, args);
    JobStatus out;
    out.state = detail::checked_enum(detail::raw_enum(args.state), 1, JobState::count_,
                                     "Job_Status", "job state");
    out.code = detail::checked_code(args.code);
    out.message = detail::string_or_empty(args.message);
    out.submit_time = std::chrono::nanoseconds(static_cast<int64_t>(args.submit_time_ns));
    out.start_time = std::chrono::nanoseconds(static_cast<int64_t>(args.start_time_ns));
    out.end_time = std::chrono::nanoseconds(static_cast<int64_t>(args.end_time_ns));
    out.h2d_end_time = std::chrono::nanoseconds(static_cast<int64_t>(args.h2d_end_time_ns));
    out.compute_end_time = std::chrono::nanoseconds(static_cast<int64_t>(args.compute_end_time_ns));
    out.compute_start_time =
        std::chrono::nanoseconds(static_cast<int64_t>(args.compute_start_time_ns));
    return out;
  }

  // Cancels the job if it is not final yet (Job_Cancel).
  void cancel() {
    auto args = detail::make_args<Calrt_Job_Cancel_Args>();
    args.job = checked("Job_Cancel");
    CALRT_HPP_CALL(api(), Job_Cancel, args);
  }

  // Releases the job handle now, reporting errors (Job_Destroy); *this becomes empty.
  void destroy() { close("Job_Destroy"); }
};

// ---------------------------------------------------------------------------------------
// KV cache.
// ---------------------------------------------------------------------------------------

// Kv_Info, converted.
struct KvInfo {
  uint32_t capacity_tokens = 0;
  uint32_t filled_tokens = 0;  // one past the highest position written
};

class Kv : public detail::Owner<CalrtKv, detail::HandleDeleter<detail::KvTraits>> {
 public:
  using Owner::Owner;

  // Allocates room for one sequence of up to capacity_tokens positions (Kv_Allocate).
  static Kv allocate(const Calbin& calbin, uint32_t capacity_tokens) {
    if (!calbin) {
      throw Error(CALRT_INVALID_HANDLE, "Kv_Allocate", "empty calrt::Calbin");
    }
    auto args = detail::make_args<Calrt_Kv_Allocate_Args>();
    args.calbin = calbin.get();
    args.capacity_tokens = capacity_tokens;
    CALRT_HPP_CALL(calbin.api(), Kv_Allocate, args);
    return Kv(args.kv, {calbin.api()});
  }

  // Binds this KV to an input buffer (Kv_Apply), for decode row `row` of a batch calbin.
  void apply(const Buffer& input, uint32_t row = 0) const {
    auto args = detail::make_args<Calrt_Kv_Apply_Args>();
    args.kv = checked("Kv_Apply");
    args.input = input.get();
    args.row = row;
    CALRT_HPP_CALL(api(), Kv_Apply, args);
  }

  // Zeroes the contents and the fill level, keeping the allocation (Kv_Clear).
  void clear() {
    auto args = detail::make_args<Calrt_Kv_Clear_Args>();
    args.kv = checked("Kv_Clear");
    CALRT_HPP_CALL(api(), Kv_Clear, args);
  }

  // Capacity and fill level (Kv_Info).
  KvInfo info() const {
    auto args = detail::make_args<Calrt_Kv_Info_Args>();
    args.kv = checked("Kv_Info");
    CALRT_HPP_CALL(api(), Kv_Info, args);
    return KvInfo{args.capacity_tokens, args.filled_tokens};
  }

  // Returns the room to the reservation now, reporting errors (Kv_Free); *this becomes
  // empty.
  void free() { close("Kv_Free"); }
};

}  // namespace calrt
