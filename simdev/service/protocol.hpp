// protocol.hpp: the messages of the service protocol (PROTOCOL.md), shared by the daemon
// (`simdev serve`) and the client runtime. One struct per ABI call, each with the fields that
// go to the daemon (In) and those that come back (Out), most of them generated from the call
// table (abi/call_table.hpp); both sides encode and decode them with the same visit()
// functions, so the two ends cannot disagree on a layout.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <tl/expected.hpp>

#include "abi/call_table.hpp"
#include "abi/calrt.h"
#include "simdev/service/wire.hpp"

namespace simdev::service {

inline constexpr uint32_t kHelloMagic = 0x4352534d;  // "MSRC" on the wire: CalRT service
// The major changes with any payload's layout, and both ends refuse another major at hello;
// what each major added: PROTOCOL.md, "Connection".
inline constexpr uint16_t kProtocolMajor = 5;
inline constexpr uint16_t kProtocolMinor = 0;
// The code of a refusal for another protocol major or ABI major (PROTOCOL.md's
// ABI_MISMATCH): calrt.h has no code of that name, and UNIMPLEMENTED is what a runtime
// answers for an ABI major it does not implement.
inline constexpr uint32_t kAbiMismatchCode = CALRT_UNIMPLEMENTED;
// length (u32) + type (u16) + flags (u16) + request id (u32).
inline constexpr size_t kHeaderBytes = 12;

enum class MessageType : uint16_t {
  hello = 1,      // client -> daemon, first frame of a connection
  welcome = 2,    // daemon -> client, the handshake's answer
  refused = 3,    // daemon -> client, the handshake failed; the daemon then closes
  keepalive = 4,  // daemon -> client, every keepalive_ms while the connection is open
  goodbye = 5,    // either side, then close: shutdown or a protocol violation
  request = 6,    // client -> daemon: one ABI call
  response = 7,   // daemon -> client: the answer to the request with the same id
};

// One ABI call. The numbers are the wire's: the CalrtApi entries in table order from 1, the
// extension calls from 100 (both as the call table lists them), the service's own from 200.
namespace call_index {
#define SIMDEV_CALL_INDEX_(Group, Verb, snake) snake,
enum Core : uint16_t { CALRT_CORE_CALLS(SIMDEV_CALL_INDEX_) };
enum Extension : uint16_t { CALRT_EXT_CALLS(SIMDEV_CALL_INDEX_) };
#undef SIMDEV_CALL_INDEX_
}  // namespace call_index
enum class Call : uint16_t {
#define SIMDEV_CORE_CALL_(Group, Verb, snake) snake = call_index::snake + 1,
#define SIMDEV_EXTENSION_CALL_(Group, Verb, snake) snake = call_index::snake + 100,
  CALRT_CORE_CALLS(SIMDEV_CORE_CALL_) CALRT_EXT_CALLS(SIMDEV_EXTENSION_CALL_)
#undef SIMDEV_CORE_CALL_
#undef SIMDEV_EXTENSION_CALL_
  // The service's own calls.
  batch = 200,
};
// The wire's numbers never move: a call is only ever appended to its list.
static_assert(static_cast<uint16_t>(Call::device_create) == 1 &&
              static_cast<uint16_t>(Call::kv_capacity) == 30);
static_assert(static_cast<uint16_t>(Call::clock_get) == 100 &&
              static_cast<uint16_t>(Call::diag_state_hash) == 107);
const char* to_string(Call call);

struct FrameHeader {
  uint32_t length = 0;  // bytes after the length field: 8 + payload
  MessageType type = MessageType::hello;
  uint16_t flags = 0;  // reserved, 0
  uint32_t request_id = 0;
  uint32_t payload_bytes() const { return length - 8; }
};

// Checks a header's length, type and flags; the message names what is wrong.
tl::expected<FrameHeader, std::string> decode_header(std::span<const uint8_t> bytes);
// A whole frame: header then payload.
std::vector<uint8_t> encode_frame(MessageType type, uint32_t request_id,
                                  std::span<const uint8_t> payload);

// ---- Handshake and control ------------------------------------------------------------

struct Hello {
  uint32_t magic = kHelloMagic;
  uint16_t protocol_major = kProtocolMajor;
  uint16_t protocol_minor = kProtocolMinor;
  uint32_t abi_major = CALRT_ABI_MAJOR;
  uint32_t abi_minor = CALRT_ABI_MINOR;
  std::string client_name;  // e.g. "calrt smoke", for the daemon's log
  uint32_t client_pid = 0;
  // The daemon's --token-file secret on TCP; empty on a Unix socket, where the kernel's peer
  // credentials say who the client is.
  std::string token;
  template <class V>
  void visit(V& v) {
    v("magic", magic), v("protocol_major", protocol_major), v("protocol_minor", protocol_minor);
    v("abi_major", abi_major), v("abi_minor", abi_minor), v("client_name", client_name);
    v("client_pid", client_pid), v("token", token);
  }
};

struct Welcome {
  uint16_t protocol_major = kProtocolMajor;
  uint16_t protocol_minor = kProtocolMinor;
  uint32_t abi_major = 0, abi_minor = 0, abi_patch = 0;  // of the daemon's runtime
  uint64_t session_id = 0;
  uint32_t keepalive_ms = 0;
  uint32_t max_clients = 0;
  std::string server_version;
  // 1: the session holds the control role and may make device-wide calls (Device_Reset,
  // Device_SetParallelMode, Fault_SetPlan); 0: those answer PERMISSION_DENIED.
  uint32_t control = 0;
  template <class V>
  void visit(V& v) {
    v("protocol_major", protocol_major), v("protocol_minor", protocol_minor);
    v("abi_major", abi_major), v("abi_minor", abi_minor), v("abi_patch", abi_patch);
    v("session_id", session_id), v("keepalive_ms", keepalive_ms);
    v("max_clients", max_clients), v("server_version", server_version), v("control", control);
  }
};

// refused and goodbye carry a CalrtCode and a message.
struct Notice {
  uint32_t code = 0;
  std::string message;
  template <class V>
  void visit(V& v) {
    v("code", code), v("message", message);
  }
};

struct Keepalive {
  template <class V>
  void visit(V&) {}
};

// ---- Calls ---------------------------------------------------------------------------
// One struct per ABI call, with the call's fields that go to the daemon (In) and those that
// come back (Out). Most are the call table's fields (abi/call_table.hpp), each as its wire
// type; the calls whose answer carries bytes or records the ABI returns through the caller's
// memory are written out below them. Enum fields travel as their raw u32 value: the daemon
// stores it into the args struct by value and the runtime refuses a value that names no
// enumerator, as in process.

// The wire type of a table field of C type T (PROTOCOL.md, "Field encodings"). A string the
// caller passes may be NULL; one the runtime returns is read as empty when it is.
template <calrt::calls::Dir D, calrt::calls::Kind K, class T>
struct WireTypeOf {
  static_assert(K == calrt::calls::Kind::integer, "a memory field has no wire type");
  using type = T;
};
template <calrt::calls::Dir D, class T>
struct WireTypeOf<D, calrt::calls::Kind::handle, T> {
  using type = WireHandle;
};
template <calrt::calls::Dir D, class T>
struct WireTypeOf<D, calrt::calls::Kind::enumeration, T> {
  using type = uint32_t;
};
template <class T>
struct WireTypeOf<calrt::calls::Dir::in, calrt::calls::Kind::string, T> {
  using type = std::optional<std::string>;
};
template <class T>
struct WireTypeOf<calrt::calls::Dir::out, calrt::calls::Kind::string, T> {
  using type = std::string;
};
template <calrt::calls::Dir D, class T>
struct WireTypeOf<D, calrt::calls::Kind::array, T> {
  using type = std::array<std::remove_extent_t<T>, std::extent_v<T>>;
};

// SIMDEV_WIRE_IN_(Group, Verb) and SIMDEV_WIRE_OUT_ declare a call's In or Out from the table:
// a member per field of that direction, named as in the args struct; visit(), which the codec
// walks; and zip(self, args, fn), which calls fn(name, wire field, args field) for each, so
// that both ends copy between the message and the args struct without naming a field.
#define SIMDEV_WHEN_(want, direction, ...) SIMDEV_WHEN_##want##_##direction(__VA_ARGS__)
#define SIMDEV_WHEN_in_in(...) __VA_ARGS__
#define SIMDEV_WHEN_in_out(...)
#define SIMDEV_WHEN_out_in(...)
#define SIMDEV_WHEN_out_out(...) __VA_ARGS__
#define SIMDEV_MEMBER_(want, direction, kind, name)                               \
  SIMDEV_WHEN_(want, direction,                                                   \
               typename WireTypeOf<calrt::calls::Dir::want, CALRT_KIND_##kind##_, \
                                   std::remove_cv_t<decltype(Args::name)>>::type name{};)
#define SIMDEV_VISIT_(want, direction, kind, name) SIMDEV_WHEN_(want, direction, v(#name, name);)
#define SIMDEV_ZIP_(want, direction, kind, name) \
  SIMDEV_WHEN_(want, direction, fn(#name, self.name, args.name);)
#define SIMDEV_IN_MEMBER_(direction, kind, name) SIMDEV_MEMBER_(in, direction, kind, name)
#define SIMDEV_IN_VISIT_(direction, kind, name) SIMDEV_VISIT_(in, direction, kind, name)
#define SIMDEV_IN_ZIP_(direction, kind, name) SIMDEV_ZIP_(in, direction, kind, name)
#define SIMDEV_OUT_MEMBER_(direction, kind, name) SIMDEV_MEMBER_(out, direction, kind, name)
#define SIMDEV_OUT_VISIT_(direction, kind, name) SIMDEV_VISIT_(out, direction, kind, name)
#define SIMDEV_OUT_ZIP_(direction, kind, name) SIMDEV_ZIP_(out, direction, kind, name)
#define SIMDEV_WIRE_HALF_(Name, HALF, Group, Verb)                            \
  struct Name {                                                               \
    CALRT_FIELDS_##Group##_##Verb(SIMDEV_##HALF##_MEMBER_) template <class V> \
    void visit([[maybe_unused]] V& v) {                                       \
      CALRT_FIELDS_##Group##_##Verb(SIMDEV_##HALF##_VISIT_)                   \
    }                                                                         \
    template <class Self, class A, class Fn>                                  \
    static void zip([[maybe_unused]] Self& self, [[maybe_unused]] A& args,    \
                    [[maybe_unused]] Fn&& fn) {                               \
      CALRT_FIELDS_##Group##_##Verb(SIMDEV_##HALF##_ZIP_)                     \
    }                                                                         \
  };
#define SIMDEV_WIRE_IN_(Group, Verb) SIMDEV_WIRE_HALF_(In, IN, Group, Verb)
#define SIMDEV_WIRE_OUT_(Group, Verb) SIMDEV_WIRE_HALF_(Out, OUT, Group, Verb)
#define SIMDEV_WIRE_HEAD_(Group, Verb, snake) \
  static constexpr Call kCall = Call::snake;  \
  using Args = Calrt_##Group##_##Verb##_Args;
// A call whose In and Out are the table's.
#define SIMDEV_WIRE_CALL_(Group, Verb, snake) \
  struct Group##Verb {                        \
    SIMDEV_WIRE_HEAD_(Group, Verb, snake)     \
    SIMDEV_WIRE_IN_(Group, Verb)              \
    SIMDEV_WIRE_OUT_(Group, Verb)             \
  };

struct DeviceCreate {
  SIMDEV_WIRE_HEAD_(Device, Create, device_create)
  SIMDEV_WIRE_IN_(Device, Create)
  struct Out {
    WireHandle device;
    // The device's CalrtClockMode; 0 when its runtime has no clock extension. The client
    // holds submits only on a virtual clock ("Held submits").
    uint32_t clock_mode = 0;
    template <class V>
    void visit(V& v) {
      v("device", device), v("clock_mode", clock_mode);
    }
  };
};

SIMDEV_WIRE_CALL_(Device, Destroy, device_destroy)
SIMDEV_WIRE_CALL_(Device, Status, device_status)
SIMDEV_WIRE_CALL_(Device, ChipStatus, device_chip_status)
SIMDEV_WIRE_CALL_(Device, Reset, device_reset)
SIMDEV_WIRE_CALL_(Device, SetParallelMode, device_set_parallel_mode)
SIMDEV_WIRE_CALL_(Calbin, Create, calbin_create)  // path absolute: the client resolves it
SIMDEV_WIRE_CALL_(Calbin, Destroy, calbin_destroy)
SIMDEV_WIRE_CALL_(Calbin, GetInfo, calbin_get_info)
SIMDEV_WIRE_CALL_(Calbin, GetModel, calbin_get_model)
SIMDEV_WIRE_CALL_(Calbin, GetTensor, calbin_get_tensor)
SIMDEV_WIRE_CALL_(Calbin, GetCsr, calbin_get_csr)
SIMDEV_WIRE_CALL_(Calbin, Configure, calbin_configure)
SIMDEV_WIRE_CALL_(Buffer, Create, buffer_create)
SIMDEV_WIRE_CALL_(Buffer, Destroy, buffer_destroy)

// The daemon maps the tensor and keeps it mapped until buffer_unmap; the bytes travel in
// the answer, and the client serves the caller from its own copy.
struct BufferMap {
  SIMDEV_WIRE_HEAD_(Buffer, Map, buffer_map)
  SIMDEV_WIRE_IN_(Buffer, Map)
  struct Out {
    Bytes data;  // size_bytes of the tensor
    template <class V>
    void visit(V& v) {
      v("data", data);
    }
  };
};

// For an input buffer the client sends the bytes the host wrote (write_back 1, data the
// whole tensor); the daemon copies them into its mapping before unmapping.
struct BufferUnmap {
  SIMDEV_WIRE_HEAD_(Buffer, Unmap, buffer_unmap)
  struct In {
    WireHandle buffer;
    uint32_t tensor_index = 0;
    uint8_t write_back = 0;
    Bytes data;
    template <class V>
    void visit(V& v) {
      v("buffer", buffer), v("tensor_index", tensor_index), v("write_back", write_back);
      v("data", data);
    }
  };
  SIMDEV_WIRE_OUT_(Buffer, Unmap)
};

SIMDEV_WIRE_CALL_(Buffer, SetCsr, buffer_set_csr)
SIMDEV_WIRE_CALL_(Buffer, GetCsr, buffer_get_csr)
SIMDEV_WIRE_CALL_(Job, Submit, job_submit)
SIMDEV_WIRE_CALL_(Job, Status, job_status)
using JobStatusOut = JobStatus::Out;

struct TensorIndex {
  uint32_t index = 0;
  template <class V>
  void visit(V& v) {
    v("index", index);
  }
};

struct FetchedTensor {
  uint32_t index = 0;
  Bytes data;
  template <class V>
  void visit(V& v) {
    v("index", index), v("data", data);
  }
};

struct JobWait {
  SIMDEV_WIRE_HEAD_(Job, Wait, job_wait)
  struct In {
    WireHandle job;
    uint64_t timeout_ns = 0;
    // Tensors of `output` (the job's output buffer) to send back with the answer if the job
    // COMPLETED, so that mapping them needs no round trip.
    WireHandle output;
    std::vector<TensorIndex> fetch;
    template <class V>
    void visit(V& v) {
      v("job", job), v("timeout_ns", timeout_ns), v("output", output), v("fetch", fetch);
    }
  };
  struct Out {
    uint32_t result = 0, state = 0;
    // The job's Job_Status when the wait saw it COMPLETED, FAILED or TIMED_OUT (one record;
    // none otherwise): a final job's status never changes, so the client answers the
    // Job_Status that follows a wait itself.
    std::vector<JobStatusOut> status;
    // The tensors of In::fetch that could be read (none unless COMPLETED).
    std::vector<FetchedTensor> outputs;
    // The job waited for: In::job, or the job a Batch's submit made.
    WireHandle job;
    template <class V>
    void visit(V& v) {
      v("result", result), v("state", state), v("status", status), v("outputs", outputs);
      v("job", job);
    }
  };
};

SIMDEV_WIRE_CALL_(Job, Cancel, job_cancel)
SIMDEV_WIRE_CALL_(Job, Destroy, job_destroy)
SIMDEV_WIRE_CALL_(Kv, Allocate, kv_allocate)
SIMDEV_WIRE_CALL_(Kv, Apply, kv_apply)
SIMDEV_WIRE_CALL_(Kv, Free, kv_free)
SIMDEV_WIRE_CALL_(Kv, Clear, kv_clear)
SIMDEV_WIRE_CALL_(Kv, Info, kv_info)
SIMDEV_WIRE_CALL_(Kv, Capacity, kv_capacity)

// ---- Extension calls (the device handle first, as in calrt_ext.h) ----------------------

SIMDEV_WIRE_CALL_(Clock, Get, clock_get)
SIMDEV_WIRE_CALL_(Clock, HostSpend, clock_host_spend)
SIMDEV_WIRE_CALL_(Trace, Enable, trace_enable)

struct WireTraceEvent {
  uint32_t track = 0, kind = 0, chip = 0;
  int32_t layer = 0;
  uint64_t job_serial = 0, begin_ns = 0, end_ns = 0, bytes = 0, flops = 0;
  std::string label;  // the client interns it: the ABI promises static storage
  template <class V>
  void visit(V& v) {
    v("track", track), v("kind", kind), v("chip", chip), v("layer", layer);
    v("job_serial", job_serial), v("begin_ns", begin_ns), v("end_ns", end_ns);
    v("bytes", bytes), v("flops", flops), v("label", label);
  }
};

struct TraceRead {
  SIMDEV_WIRE_HEAD_(Trace, Read, trace_read)
  struct In {
    WireHandle device;
    uint64_t capacity = 0;  // events the caller has room for
    template <class V>
    void visit(V& v) {
      v("device", device), v("capacity", capacity);
    }
  };
  struct Out {
    std::vector<WireTraceEvent> events;
    uint64_t dropped = 0;
    template <class V>
    void visit(V& v) {
      v("events", events), v("dropped", dropped);
    }
  };
};

struct FaultSetPlan {
  SIMDEV_WIRE_HEAD_(Fault, SetPlan, fault_set_plan)
  struct In {
    WireHandle device;
    uint8_t plan_null = 0;  // 1: the caller passed plan == NULL
    Bytes plan;
    uint64_t plan_size = 0;  // as the caller passed it (the runtime checks NULL with size > 0)
    template <class V>
    void visit(V& v) {
      v("device", device), v("plan_null", plan_null), v("plan", plan), v("plan_size", plan_size);
    }
  };
  SIMDEV_WIRE_OUT_(Fault, SetPlan)
};

struct WireFaultHit {
  std::string kind, site;  // the client interns them: the ABI promises static storage
  uint64_t count = 0;
  template <class V>
  void visit(V& v) {
    v("kind", kind), v("site", site), v("count", count);
  }
};

struct FaultGetHits {
  SIMDEV_WIRE_HEAD_(Fault, GetHits, fault_get_hits)
  struct In {
    WireHandle device;
    uint64_t capacity = 0;
    template <class V>
    void visit(V& v) {
      v("device", device), v("capacity", capacity);
    }
  };
  struct Out {
    uint64_t count = 0;              // pairs the runtime has
    std::vector<WireFaultHit> hits;  // the first min(count, capacity)
    template <class V>
    void visit(V& v) {
      v("count", count), v("hits", hits);
    }
  };
};

struct DiagReport {
  SIMDEV_WIRE_HEAD_(Diag, Report, diag_report)
  struct In {
    WireHandle device;
    uint64_t capacity = 0;
    template <class V>
    void visit(V& v) {
      v("device", device), v("capacity", capacity);
    }
  };
  struct Out {
    uint64_t size = 0;
    Bytes report;  // empty when size > capacity
    template <class V>
    void visit(V& v) {
      v("size", size), v("report", report);
    }
  };
};

SIMDEV_WIRE_CALL_(Diag, StateHash, diag_state_hash)

#undef SIMDEV_WIRE_CALL_
#undef SIMDEV_WIRE_HEAD_
#undef SIMDEV_WIRE_OUT_
#undef SIMDEV_WIRE_IN_
#undef SIMDEV_WIRE_HALF_
#undef SIMDEV_OUT_ZIP_
#undef SIMDEV_OUT_VISIT_
#undef SIMDEV_OUT_MEMBER_
#undef SIMDEV_IN_ZIP_
#undef SIMDEV_IN_VISIT_
#undef SIMDEV_IN_MEMBER_
#undef SIMDEV_ZIP_
#undef SIMDEV_VISIT_
#undef SIMDEV_MEMBER_
#undef SIMDEV_WHEN_out_out
#undef SIMDEV_WHEN_out_in
#undef SIMDEV_WHEN_in_out
#undef SIMDEV_WHEN_in_in
#undef SIMDEV_WHEN_

// Buffer calls that the client answered itself, run in order before one more call, in one
// visit of the device lane (PROTOCOL.md, "Held buffer calls"). Each entry is a whole request
// payload of Buffer_Map, Buffer_Unmap, Buffer_SetCsr or Job_Destroy; then may come a
// Job_Submit, and after it a Job_Wait of job 0: the job that submit made. The daemon stops at
// the first call that fails; the answer is how many ran and the response payload of the last
// one run, or, when every call before the wait succeeded, the wait's own response.
struct HeldCall {
  Bytes request;
  template <class V>
  void visit(V& v) {
    v("request", request);
  }
};
inline constexpr uint32_t kMaxBatchCalls = 4096;

struct Batch {
  static constexpr Call kCall = Call::batch;
  struct In {
    std::vector<HeldCall> calls;
    template <class V>
    void visit(V& v) {
      v("calls", calls);
    }
  };
  struct Out {
    uint32_t ran = 0;
    Bytes response;
    template <class V>
    void visit(V& v) {
      v("ran", ran), v("response", response);
    }
  };
};

// Every call, in Call order; a request decodes into one of their In structs.
template <class... Calls>
struct CallList {};
#define SIMDEV_CALL_STRUCT_(Group, Verb, snake) Group##Verb,
using AllCalls =
    CallList<CALRT_CORE_CALLS(SIMDEV_CALL_STRUCT_) CALRT_EXT_CALLS(SIMDEV_CALL_STRUCT_) Batch>;
#undef SIMDEV_CALL_STRUCT_

// A decoded request: the call and its inputs, tagged by the call's struct.
template <class C>
struct Tagged {
  using CallType = C;
  typename C::In in;
};
template <class List>
struct RequestVariant;
template <class... Calls>
struct RequestVariant<CallList<Calls...>> {
  using type = std::variant<Tagged<Calls>...>;
};
using Request = RequestVariant<AllCalls>::type;

// ---- Payload codecs -------------------------------------------------------------------
// request payload: u16 call, then In. response payload: u16 call, u32 code (CalrtCode, 0 for
// success), string message, then Out (always present; zeros where the call wrote nothing).

template <class C>
std::vector<uint8_t> encode_request_payload(const typename C::In& in) {
  std::vector<uint8_t> out;
  Writer w(out);
  w.u16(static_cast<uint16_t>(C::kCall));
  const_cast<typename C::In&>(in).visit(w);
  return out;
}

// Decodes a request payload; the error names the call and the field.
tl::expected<Request, std::string> decode_request_payload(std::span<const uint8_t> payload);

template <class C>
struct Response {
  uint32_t code = CALRT_OK;
  std::string message;
  typename C::Out out;
};

template <class C>
std::vector<uint8_t> encode_response_payload(const Response<C>& r) {
  std::vector<uint8_t> out;
  Writer w(out);
  w.u16(static_cast<uint16_t>(C::kCall));
  w.u32(r.code);
  w("message", r.message);
  const_cast<typename C::Out&>(r.out).visit(w);
  return out;
}

template <class C>
tl::expected<Response<C>, std::string> decode_response_payload(std::span<const uint8_t> payload) {
  Reader r(payload);
  const uint16_t call = r.u16("call");
  if (r.ok() && call != static_cast<uint16_t>(C::kCall)) {
    return tl::unexpected(std::string("response for call ") + std::to_string(call) + " where " +
                          to_string(C::kCall) + " was asked");
  }
  Response<C> resp;
  r("code", resp.code);
  r("message", resp.message);
  resp.out.visit(r);
  r.expect_end(to_string(C::kCall));
  if (!r.ok()) return tl::unexpected(std::string(to_string(C::kCall)) + " response: " + r.error());
  return resp;
}

// Control payloads (Hello, Welcome, Notice, Keepalive).
template <class M>
std::vector<uint8_t> encode_payload(const M& m) {
  std::vector<uint8_t> out;
  Writer w(out);
  const_cast<M&>(m).visit(w);
  return out;
}
template <class M>
tl::expected<M, std::string> decode_payload(std::span<const uint8_t> payload, const char* what) {
  Reader r(payload);
  M m;
  m.visit(r);
  r.expect_end(what);
  if (!r.ok()) return tl::unexpected(std::string(what) + ": " + r.error());
  return m;
}

}  // namespace simdev::service
