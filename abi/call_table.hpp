// call_table.hpp: every call of the Runtime ABI (calrt.h and calrt_ext.h) once, with the
// fields of its args struct, each with its direction and kind, in struct order.
//
// The code that moves a call's fields from one place to another is generated from this table:
// the service protocol's messages and both ends' copies (simdev/service), the validation
// layer's recording and replay's decoder of it, the conformance suite's out-field checks, and
// the struct sizes of calrt.hpp. A field appended to an args struct is appended here too; the
// static_asserts below refuse a table that skips a field of its struct or gives one a kind
// its C type does not have, so a struct and its row cannot drift apart unnoticed.
//
// Two layers:
//   - X-macros, for what must be spelled as code (a struct member, a switch case):
//       CALRT_*_CALLS(X)   X(Group, Verb, snake) per call: the args struct is
//                          Calrt_<Group>_<Verb>_Args, the table entry <Group>_<Verb>, and
//                          <snake> the function that implements it in this project's runtimes;
//       CALRT_FIELDS_<Group>_<Verb>(F)   F(direction, kind, name) per field.
//   - calrt::calls::CallInfo<Args>, the same as constexpr data (name, entry, fields, struct_size)
//     for templates that walk the fields with for_each_field.
//
// Kinds: handle (an opaque object pointer: CalrtDevice*, ...), enum (a CalrtXxx enumeration;
// read and written by raw value, since a caller may store a value outside it), integer,
// string (a NUL-terminated const char*), array (a fixed-size array of integers), memory (a
// pointer to bytes whose extent another field gives, which no generic code can copy).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "abi/calrt.h"
#include "abi/calrt_ext.h"

// ---- Calls ------------------------------------------------------------------------------

// The error-object accessors, which return nothing and cannot fail.
#define CALRT_ERROR_CALLS(X)       \
  X(Error, Destroy, error_destroy) \
  X(Error, Message, error_message) \
  X(Error, GetCode, error_get_code)

// Every other entry of CalrtApi, in table order.
#define CALRT_CORE_CALLS(X)                            \
  X(Device, Create, device_create)                     \
  X(Device, Destroy, device_destroy)                   \
  X(Device, Status, device_status)                     \
  X(Device, ChipStatus, device_chip_status)            \
  X(Device, Reset, device_reset)                       \
  X(Device, SetParallelMode, device_set_parallel_mode) \
  X(Calbin, Create, calbin_create)                     \
  X(Calbin, Destroy, calbin_destroy)                   \
  X(Calbin, GetInfo, calbin_get_info)                  \
  X(Calbin, GetModel, calbin_get_model)                \
  X(Calbin, GetTensor, calbin_get_tensor)              \
  X(Calbin, GetCsr, calbin_get_csr)                    \
  X(Calbin, Configure, calbin_configure)               \
  X(Buffer, Create, buffer_create)                     \
  X(Buffer, Destroy, buffer_destroy)                   \
  X(Buffer, Map, buffer_map)                           \
  X(Buffer, Unmap, buffer_unmap)                       \
  X(Buffer, SetCsr, buffer_set_csr)                    \
  X(Buffer, GetCsr, buffer_get_csr)                    \
  X(Job, Submit, job_submit)                           \
  X(Job, Wait, job_wait)                               \
  X(Job, Status, job_status)                           \
  X(Job, Cancel, job_cancel)                           \
  X(Job, Destroy, job_destroy)                         \
  X(Kv, Allocate, kv_allocate)                         \
  X(Kv, Apply, kv_apply)                               \
  X(Kv, Free, kv_free)                                 \
  X(Kv, Clear, kv_clear)                               \
  X(Kv, Info, kv_info)                                 \
  X(Kv, Capacity, kv_capacity)

// The extensions of calrt_ext.h, each in its struct's field order.
#define CALRT_CLOCK_CALLS(X) \
  X(Clock, Get, clock_get)   \
  X(Clock, HostSpend, clock_host_spend)
#define CALRT_TRACE_CALLS(X)     \
  X(Trace, Enable, trace_enable) \
  X(Trace, Read, trace_read)
#define CALRT_FAULT_CALLS(X)        \
  X(Fault, SetPlan, fault_set_plan) \
  X(Fault, GetHits, fault_get_hits)
#define CALRT_DIAG_CALLS(X)    \
  X(Diag, Report, diag_report) \
  X(Diag, StateHash, diag_state_hash)
#define CALRT_PROBE_CALLS(X) X(Probe, Read, probe_read)

// CLOCK, TRACE, FAULT and DIAG: the extensions every runtime of this project offers (PROBE is
// the simulator's alone).
#define CALRT_EXT_CALLS(X) \
  CALRT_CLOCK_CALLS(X) CALRT_TRACE_CALLS(X) CALRT_FAULT_CALLS(X) CALRT_DIAG_CALLS(X)

// ---- Fields -----------------------------------------------------------------------------

#define CALRT_FIELDS_Error_Destroy(F) F(in, handle, error)
#define CALRT_FIELDS_Error_Message(F) \
  F(in, handle, error)                \
  F(out, string, message)             \
  F(out, integer, message_size)
#define CALRT_FIELDS_Error_GetCode(F) \
  F(in, handle, error)                \
  F(out, enum, code)

#define CALRT_FIELDS_Device_Create(F) \
  F(in, enum, kind)                   \
  F(in, integer, index)               \
  F(in, string, config)               \
  F(in, integer, timeout_ns)          \
  F(out, handle, device)
#define CALRT_FIELDS_Device_Destroy(F) F(in, handle, device)
#define CALRT_FIELDS_Device_Status(F) \
  F(in, handle, device)               \
  F(out, enum, state)                 \
  F(out, string, runtime_version)     \
  F(out, string, firmware_version)    \
  F(out, string, driver_version)      \
  F(out, string, device_name)         \
  F(out, integer, abi_major)          \
  F(out, integer, abi_minor)          \
  F(out, integer, abi_patch)          \
  F(out, integer, chip_count)         \
  F(out, integer, parallel_mode)      \
  F(out, integer, error_count)        \
  F(out, integer, reset_count)        \
  F(out, integer, device_time_ns)     \
  F(out, enum, last_error)
#define CALRT_FIELDS_Device_ChipStatus(F) \
  F(in, handle, device)                   \
  F(in, integer, chip)                    \
  F(out, enum, health)                    \
  F(out, integer, dram_total_bytes)       \
  F(out, integer, dram_used_bytes)        \
  F(out, integer, ecc_corrected)          \
  F(out, integer, ecc_uncorrected)        \
  F(out, integer, busy_time_ns)
#define CALRT_FIELDS_Device_Reset(F) \
  F(in, handle, device)              \
  F(in, enum, level)                 \
  F(in, integer, timeout_ns)         \
  F(out, enum, state)
#define CALRT_FIELDS_Device_SetParallelMode(F) \
  F(in, handle, device)                        \
  F(in, integer, enable)

#define CALRT_FIELDS_Calbin_Create(F) \
  F(in, handle, device)               \
  F(in, string, path)                 \
  F(in, integer, timeout_ns)          \
  F(out, handle, calbin)
#define CALRT_FIELDS_Calbin_Destroy(F) F(in, handle, calbin)
#define CALRT_FIELDS_Calbin_GetInfo(F) \
  F(in, handle, calbin)                \
  F(out, string, calbin_version)       \
  F(out, string, architecture)         \
  F(out, string, runtime_abi)          \
  F(out, integer, model_count)         \
  F(out, integer, chip_count)          \
  F(out, integer, vocab)               \
  F(out, integer, context)             \
  F(out, integer, batch)               \
  F(out, integer, layers)              \
  F(out, integer, hidden)              \
  F(out, integer, q_heads)             \
  F(out, integer, kv_heads)            \
  F(out, integer, head_dim)            \
  F(out, integer, prefill_chunk)       \
  F(out, enum, kv_dtype)               \
  F(out, integer, configured)
#define CALRT_FIELDS_Calbin_GetModel(F) \
  F(in, handle, calbin)                 \
  F(in, integer, model_index)           \
  F(out, string, name)                  \
  F(out, enum, type)                    \
  F(out, integer, input_count)          \
  F(out, integer, output_count)         \
  F(out, integer, csr_count)
#define CALRT_FIELDS_Calbin_GetTensor(F) \
  F(in, handle, calbin)                  \
  F(in, string, model_name)              \
  F(in, enum, direction)                 \
  F(in, integer, index)                  \
  F(out, string, name)                   \
  F(out, enum, role)                     \
  F(out, enum, dtype)                    \
  F(out, integer, rank)                  \
  F(out, array, dims)                    \
  F(out, enum, layout)                   \
  F(out, integer, tile_d0)               \
  F(out, integer, size_bytes)            \
  F(out, integer, device_address)        \
  F(out, integer, chip_mask)
#define CALRT_FIELDS_Calbin_GetCsr(F) \
  F(in, handle, calbin)               \
  F(in, string, model_name)           \
  F(in, integer, index)               \
  F(out, string, name)                \
  F(out, integer, address)
#define CALRT_FIELDS_Calbin_Configure(F) \
  F(in, handle, calbin)                  \
  F(in, integer, timeout_ns)             \
  F(out, integer, configure_time_ns)     \
  F(out, integer, chip_count)            \
  F(out, array, memory_used_bytes)

#define CALRT_FIELDS_Buffer_Create(F) \
  F(in, handle, calbin)               \
  F(in, string, model_name)           \
  F(in, enum, direction)              \
  F(in, integer, slot)                \
  F(out, handle, buffer)
#define CALRT_FIELDS_Buffer_Destroy(F) F(in, handle, buffer)
#define CALRT_FIELDS_Buffer_Map(F) \
  F(in, handle, buffer)            \
  F(in, integer, tensor_index)     \
  F(in, integer, timeout_ns)       \
  F(out, memory, data)             \
  F(out, integer, size_bytes)
#define CALRT_FIELDS_Buffer_Unmap(F) \
  F(in, handle, buffer)              \
  F(in, integer, tensor_index)
#define CALRT_FIELDS_Buffer_SetCsr(F) \
  F(in, handle, buffer)               \
  F(in, integer, csr_index)           \
  F(in, integer, value)
#define CALRT_FIELDS_Buffer_GetCsr(F) \
  F(in, handle, buffer)               \
  F(in, integer, csr_index)           \
  F(out, integer, value)

#define CALRT_FIELDS_Job_Submit(F) \
  F(in, handle, calbin)            \
  F(in, string, model_name)        \
  F(in, handle, input)             \
  F(in, handle, output)            \
  F(out, handle, job)
#define CALRT_FIELDS_Job_Wait(F) \
  F(in, handle, job)             \
  F(in, integer, timeout_ns)     \
  F(out, enum, result)           \
  F(out, enum, state)
#define CALRT_FIELDS_Job_Status(F)     \
  F(in, handle, job)                   \
  F(out, enum, state)                  \
  F(out, enum, code)                   \
  F(out, string, message)              \
  F(out, integer, submit_time_ns)      \
  F(out, integer, start_time_ns)       \
  F(out, integer, end_time_ns)         \
  F(out, integer, h2d_end_time_ns)     \
  F(out, integer, compute_end_time_ns) \
  F(out, integer, compute_start_time_ns)
#define CALRT_FIELDS_Job_Cancel(F) F(in, handle, job)
#define CALRT_FIELDS_Job_Destroy(F) F(in, handle, job)

#define CALRT_FIELDS_Kv_Allocate(F) \
  F(in, handle, calbin)             \
  F(in, integer, capacity_tokens)   \
  F(out, handle, kv)
#define CALRT_FIELDS_Kv_Apply(F) \
  F(in, handle, kv)              \
  F(in, handle, input)           \
  F(in, integer, row)
#define CALRT_FIELDS_Kv_Free(F) F(in, handle, kv)
#define CALRT_FIELDS_Kv_Clear(F) F(in, handle, kv)
#define CALRT_FIELDS_Kv_Info(F)    \
  F(in, handle, kv)                \
  F(out, integer, capacity_tokens) \
  F(out, integer, filled_tokens)
#define CALRT_FIELDS_Kv_Capacity(F)         \
  F(in, handle, calbin)                     \
  F(out, integer, total_tokens)             \
  F(out, integer, free_tokens)              \
  F(out, integer, largest_free_tokens)      \
  F(out, integer, bytes_per_token_per_chip) \
  F(out, integer, live_handles)

#define CALRT_FIELDS_Clock_Get(F) \
  F(in, handle, device)           \
  F(out, enum, mode)              \
  F(out, integer, device_time_ns)
#define CALRT_FIELDS_Clock_HostSpend(F) \
  F(in, handle, device)                 \
  F(in, integer, duration_ns)
#define CALRT_FIELDS_Trace_Enable(F) \
  F(in, handle, device)              \
  F(in, integer, enable)             \
  F(in, integer, capacity_events)
#define CALRT_FIELDS_Trace_Read(F)  \
  F(in, handle, device)             \
  F(in, memory, events)             \
  F(in, integer, event_struct_size) \
  F(in, integer, capacity)          \
  F(out, integer, count)            \
  F(out, integer, dropped)
#define CALRT_FIELDS_Fault_SetPlan(F) \
  F(in, handle, device)               \
  F(in, memory, plan)                 \
  F(in, integer, plan_size)
#define CALRT_FIELDS_Fault_GetHits(F) \
  F(in, handle, device)               \
  F(in, memory, hits)                 \
  F(in, integer, hit_struct_size)     \
  F(in, integer, capacity)            \
  F(out, integer, count)
#define CALRT_FIELDS_Diag_Report(F) \
  F(in, handle, device)             \
  F(in, memory, buffer)             \
  F(in, integer, capacity)          \
  F(out, integer, size)
#define CALRT_FIELDS_Diag_StateHash(F) \
  F(in, handle, device)                \
  F(out, integer, hash)
#define CALRT_FIELDS_Probe_Read(F) \
  F(in, handle, job)               \
  F(in, integer, point)            \
  F(in, memory, values)            \
  F(in, integer, capacity)         \
  F(out, integer, count)           \
  F(out, integer, points)

// ---- The same as data -------------------------------------------------------------------

namespace calrt::calls {

enum class Dir { in, out };
enum class Kind { handle, enumeration, integer, string, array, memory };

template <class T>
inline constexpr bool kIsHandle =
    std::is_same_v<T, CalrtError*> || std::is_same_v<T, const CalrtError*> ||
    std::is_same_v<T, CalrtDevice*> || std::is_same_v<T, CalrtCalbin*> ||
    std::is_same_v<T, CalrtBuffer*> || std::is_same_v<T, CalrtJob*> || std::is_same_v<T, CalrtKv*>;

// What a handle is called in messages and recordings ("buffer#3").
template <class T>
inline constexpr const char* kHandleName = nullptr;
template <>
inline constexpr const char* kHandleName<CalrtError*> = "error";
template <>
inline constexpr const char* kHandleName<const CalrtError*> = "error";
template <>
inline constexpr const char* kHandleName<CalrtDevice*> = "device";
template <>
inline constexpr const char* kHandleName<CalrtCalbin*> = "calbin";
template <>
inline constexpr const char* kHandleName<CalrtBuffer*> = "buffer";
template <>
inline constexpr const char* kHandleName<CalrtJob*> = "job";
template <>
inline constexpr const char* kHandleName<CalrtKv*> = "kv";

// Whether a field of C type T can have kind K: the table's kinds are checked against calrt.h.
template <Kind K, class T>
constexpr bool kind_fits() {
  if constexpr (K == Kind::handle) {
    return kIsHandle<T>;
  } else if constexpr (K == Kind::enumeration) {
    return std::is_enum_v<T> && sizeof(T) == sizeof(uint32_t);
  } else if constexpr (K == Kind::integer) {
    return std::is_integral_v<T>;
  } else if constexpr (K == Kind::string) {
    return std::is_same_v<T, const char*>;
  } else if constexpr (K == Kind::array) {
    return std::is_array_v<T> && std::is_integral_v<std::remove_extent_t<T>>;
  } else {
    return std::is_pointer_v<T> && !kIsHandle<T>;
  }
}

// One field of args struct Args: `name` at `offset`, read and written with get().
template <class Args, auto Member, Dir D, Kind K>
struct Field {
  using Type = std::remove_cvref_t<decltype(std::declval<Args&>().*Member)>;
  static constexpr Dir dir = D;
  static constexpr Kind kind = K;
  static_assert(kind_fits<K, Type>(), "the table gives a field a kind its C type does not have");

  const char* name;
  size_t offset;

  static constexpr Type& get(Args& args) { return args.*Member; }
  static constexpr const Type& get(const Args& args) { return args.*Member; }
  constexpr size_t end() const { return offset + sizeof(Type); }
  // Whether a caller's struct of `struct_size` bytes holds this field (an older caller's
  // struct ends before the fields appended since).
  constexpr bool covered_by(size_t struct_size) const { return struct_size >= end(); }
};

// The call of args struct Args: name, entry (a member of Table: CalrtApi or an extension
// struct), fields (a tuple of Field), struct_size (what CALRT_*_STRUCT_SIZE gives). Defined
// below for every call of the table; empty for any other type.
template <class Args>
struct CallInfo {};

template <class Args>
concept AbiCall = requires {
  CallInfo<Args>::struct_size;
};

// What a table struct is: CALRT_EXT_* and the size a caller needs of it.
template <class Table>
struct TableInfo;
template <>
struct TableInfo<CalrtApi> {
  static constexpr size_t min_size = CALRT_API_STRUCT_SIZE;
};
#define CALRT_TABLE_INFO_(Table, TYPE, SIZE, label)  \
  template <>                                        \
  struct TableInfo<Table> {                          \
    static constexpr CalrtExtensionType type = TYPE; \
    static constexpr size_t min_size = SIZE;         \
    static constexpr const char* name = label;       \
  };
CALRT_TABLE_INFO_(CalrtClockExtension, CALRT_EXT_CLOCK, CALRT_CLOCK_EXTENSION_STRUCT_SIZE, "clock")
CALRT_TABLE_INFO_(CalrtTraceExtension, CALRT_EXT_TRACE, CALRT_TRACE_EXTENSION_STRUCT_SIZE, "trace")
CALRT_TABLE_INFO_(CalrtFaultExtension, CALRT_EXT_FAULT, CALRT_FAULT_EXTENSION_STRUCT_SIZE, "fault")
CALRT_TABLE_INFO_(CalrtDiagExtension, CALRT_EXT_DIAG, CALRT_DIAG_EXTENSION_STRUCT_SIZE, "diag")
CALRT_TABLE_INFO_(CalrtProbeExtension, CALRT_EXT_PROBE, CALRT_PROBE_EXTENSION_STRUCT_SIZE, "probe")
#undef CALRT_TABLE_INFO_

// Calls fn(field) for every field of Args, in struct order.
template <AbiCall Args, class Fn>
constexpr void for_each_field(Fn&& fn) {
  std::apply([&](const auto&... field) { (fn(field), ...); }, CallInfo<Args>::fields);
}

namespace detail {

struct FieldsBegin {};
template <class... Fields>
constexpr std::tuple<Fields...> make_fields(FieldsBegin, Fields... each) {
  return {each...};
}

constexpr size_t round_up(size_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// Whether `fields` are all the fields of Args after struct_size and extension, in order:
// each starts where the one before ends (up to its alignment), and the struct ends after
// the last. A field the table left out leaves a gap wider than alignment padding, except a
// small one before a more aligned field; tests/abi/call_table_test.cpp also checks each
// struct's end against its CALRT_*_STRUCT_SIZE macro.
template <class Args, class... Fields>
constexpr bool covers_struct(const std::tuple<Fields...>& fields) {
  size_t end = offsetof(Args, extension) + sizeof(void*);
  bool contiguous = true;
  std::apply(
      [&](const auto&... field) {
        ((contiguous =
              contiguous &&
              field.offset ==
                  round_up(end, alignof(typename std::remove_cvref_t<decltype(field)>::Type)),
          end = field.end()),
         ...);
      },
      fields);
  return contiguous && round_up(end, alignof(Args)) == sizeof(Args);
}

template <class... Fields>
constexpr size_t end_of(const std::tuple<Fields...>& fields) {
  return std::apply(
      [](const auto&... field) {
        return std::max({size_t{0}, field.end()...});
      },
      fields);
}

}  // namespace detail

#define CALRT_KIND_handle_ ::calrt::calls::Kind::handle
#define CALRT_KIND_enum_ ::calrt::calls::Kind::enumeration
#define CALRT_KIND_integer_ ::calrt::calls::Kind::integer
#define CALRT_KIND_string_ ::calrt::calls::Kind::string
#define CALRT_KIND_array_ ::calrt::calls::Kind::array
#define CALRT_KIND_memory_ ::calrt::calls::Kind::memory
#define CALRT_DESCRIBE_FIELD_(direction, kind, field)                         \
  , ::calrt::calls::Field<Args, &Args::field, ::calrt::calls::Dir::direction, \
                          CALRT_KIND_##kind##_> {                             \
#field, offsetof(Args, field)                                             \
  }
#define CALRT_DESCRIBE_CALL_(TableType, Group, Verb)                                         \
  template <>                                                                                \
  struct CallInfo<Calrt_##Group##_##Verb##_Args> {                                           \
    using Args = Calrt_##Group##_##Verb##_Args;                                              \
    using Table = TableType;                                                                 \
    static constexpr const char* name = #Group "_" #Verb;                                    \
    static constexpr auto entry = &Table::Group##_##Verb;                                    \
    static constexpr auto fields = detail::make_fields(                                      \
        detail::FieldsBegin {} CALRT_FIELDS_##Group##_##Verb(CALRT_DESCRIBE_FIELD_));        \
    static constexpr size_t struct_size = detail::end_of(fields);                            \
    static_assert(detail::covers_struct<Args>(fields),                                       \
                  "the table's fields of " #Group "_" #Verb " are not all of its struct's"); \
  };
#define CALRT_DESCRIBE_API_CALL_(Group, Verb, snake) CALRT_DESCRIBE_CALL_(CalrtApi, Group, Verb)
#define CALRT_DESCRIBE_CLOCK_CALL_(Group, Verb, snake) \
  CALRT_DESCRIBE_CALL_(CalrtClockExtension, Group, Verb)
#define CALRT_DESCRIBE_TRACE_CALL_(Group, Verb, snake) \
  CALRT_DESCRIBE_CALL_(CalrtTraceExtension, Group, Verb)
#define CALRT_DESCRIBE_FAULT_CALL_(Group, Verb, snake) \
  CALRT_DESCRIBE_CALL_(CalrtFaultExtension, Group, Verb)
#define CALRT_DESCRIBE_DIAG_CALL_(Group, Verb, snake) \
  CALRT_DESCRIBE_CALL_(CalrtDiagExtension, Group, Verb)
#define CALRT_DESCRIBE_PROBE_CALL_(Group, Verb, snake) \
  CALRT_DESCRIBE_CALL_(CalrtProbeExtension, Group, Verb)

CALRT_ERROR_CALLS(CALRT_DESCRIBE_API_CALL_)
CALRT_CORE_CALLS(CALRT_DESCRIBE_API_CALL_)
CALRT_CLOCK_CALLS(CALRT_DESCRIBE_CLOCK_CALL_)
CALRT_TRACE_CALLS(CALRT_DESCRIBE_TRACE_CALL_)
CALRT_FAULT_CALLS(CALRT_DESCRIBE_FAULT_CALL_)
CALRT_DIAG_CALLS(CALRT_DESCRIBE_DIAG_CALL_)
CALRT_PROBE_CALLS(CALRT_DESCRIBE_PROBE_CALL_)

#undef CALRT_DESCRIBE_API_CALL_
#undef CALRT_DESCRIBE_CLOCK_CALL_
#undef CALRT_DESCRIBE_TRACE_CALL_
#undef CALRT_DESCRIBE_FAULT_CALL_
#undef CALRT_DESCRIBE_DIAG_CALL_
#undef CALRT_DESCRIBE_PROBE_CALL_
#undef CALRT_DESCRIBE_CALL_
#undef CALRT_DESCRIBE_FIELD_

}  // namespace calrt::calls
