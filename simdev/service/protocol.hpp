// protocol.hpp: the messages of the service protocol (PROTOCOL.md), shared by the daemon
// (`simdev serve`) and the client runtime. One struct per ABI call, each with the fields that
// go to the daemon (In) and those that come back (Out); both sides encode and decode them
// with the same visit() functions, so the two ends cannot disagree on a layout.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include <tl/expected.hpp>

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

// One ABI call. The numbers are the wire's; the first block follows CalrtApi's order.
enum class Call : uint16_t {
  device_create = 1,
  device_destroy,
  device_status,
  device_chip_status,
  device_reset,
  device_set_parallel_mode,
  calbin_create,
  calbin_destroy,
  calbin_get_info,
  calbin_get_model,
  calbin_get_tensor,
  calbin_get_csr,
  calbin_configure,
  buffer_create,
  buffer_destroy,
  buffer_map,
  buffer_unmap,
  buffer_set_csr,
  buffer_get_csr,
  job_submit,
  job_wait,
  job_status,
  job_cancel,
  job_destroy,
  kv_allocate,
  kv_apply,
  kv_free,
  kv_clear,
  kv_info,
  kv_capacity,
  // Extensions (abi/calrt_ext.h).
  clock_get = 100,
  clock_host_spend,
  trace_enable,
  trace_read,
  fault_set_plan,
  fault_get_hits,
  diag_report,
  diag_state_hash,
  // The service's own calls.
  batch = 200,
};
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
// Enum fields travel as their raw u32 value: the daemon stores it into the args struct by
// value and the runtime refuses a value that names no enumerator, as in process.

struct DeviceCreate {
  static constexpr Call kCall = Call::device_create;
  struct In {
    uint32_t kind = 0, index = 0;
    std::optional<std::string> config;
    uint64_t timeout_ns = 0;
    template <class V>
    void visit(V& v) {
      v("kind", kind), v("index", index), v("config", config), v("timeout_ns", timeout_ns);
    }
  };
  struct Out {
    WireHandle device;
    // The device's CalrtClockMode; 0 when its runtime has no clock extension. Protocol
    // major 5: the client holds submits only on a virtual clock ("Held submits").
    uint32_t clock_mode = 0;
    template <class V>
    void visit(V& v) {
      v("device", device), v("clock_mode", clock_mode);
    }
  };
};

struct DeviceDestroy {
  static constexpr Call kCall = Call::device_destroy;
  struct In {
    WireHandle device;
    template <class V>
    void visit(V& v) {
      v("device", device);
    }
  };
  struct Out {
    template <class V>
    void visit(V&) {}
  };
};

struct DeviceStatus {
  static constexpr Call kCall = Call::device_status;
  struct In {
    WireHandle device;
    template <class V>
    void visit(V& v) {
      v("device", device);
    }
  };
  struct Out {
    uint32_t state = 0;
    std::string runtime_version, firmware_version, driver_version, device_name;
    uint32_t abi_major = 0, abi_minor = 0, abi_patch = 0, chip_count = 0, parallel_mode = 0;
    uint64_t error_count = 0, reset_count = 0, device_time_ns = 0;
    uint32_t last_error = 0;
    template <class V>
    void visit(V& v) {
      v("state", state), v("runtime_version", runtime_version);
      v("firmware_version", firmware_version), v("driver_version", driver_version);
      v("device_name", device_name), v("abi_major", abi_major), v("abi_minor", abi_minor);
      v("abi_patch", abi_patch), v("chip_count", chip_count), v("parallel_mode", parallel_mode);
      v("error_count", error_count), v("reset_count", reset_count);
      v("device_time_ns", device_time_ns), v("last_error", last_error);
    }
  };
};

struct DeviceChipStatus {
  static constexpr Call kCall = Call::device_chip_status;
  struct In {
    WireHandle device;
    uint32_t chip = 0;
    template <class V>
    void visit(V& v) {
      v("device", device), v("chip", chip);
    }
  };
  struct Out {
    uint32_t health = 0;
    uint64_t dram_total_bytes = 0, dram_used_bytes = 0, ecc_corrected = 0, ecc_uncorrected = 0,
             busy_time_ns = 0;
    template <class V>
    void visit(V& v) {
      v("health", health), v("dram_total_bytes", dram_total_bytes);
      v("dram_used_bytes", dram_used_bytes), v("ecc_corrected", ecc_corrected);
      v("ecc_uncorrected", ecc_uncorrected), v("busy_time_ns", busy_time_ns);
    }
  };
};

struct DeviceReset {
  static constexpr Call kCall = Call::device_reset;
  struct In {
    WireHandle device;
    uint32_t level = 0;
    uint64_t timeout_ns = 0;
    template <class V>
    void visit(V& v) {
      v("device", device), v("level", level), v("timeout_ns", timeout_ns);
    }
  };
  struct Out {
    uint32_t state = 0;
    template <class V>
    void visit(V& v) {
      v("state", state);
    }
  };
};

struct DeviceSetParallelMode {
  static constexpr Call kCall = Call::device_set_parallel_mode;
  struct In {
    WireHandle device;
    uint32_t enable = 0;
    template <class V>
    void visit(V& v) {
      v("device", device), v("enable", enable);
    }
  };
  using Out = DeviceDestroy::Out;
};

struct CalbinCreate {
  static constexpr Call kCall = Call::calbin_create;
  struct In {
    WireHandle device;
    std::optional<std::string> path;  // absolute: the client resolves it against its cwd
    uint64_t timeout_ns = 0;
    template <class V>
    void visit(V& v) {
      v("device", device), v("path", path), v("timeout_ns", timeout_ns);
    }
  };
  struct Out {
    WireHandle calbin;
    template <class V>
    void visit(V& v) {
      v("calbin", calbin);
    }
  };
};

// Calls whose only input is one handle and that return nothing.
struct OneHandle {
  WireHandle handle;
  template <class V>
  void visit(V& v) {
    v("handle", handle);
  }
};

struct CalbinDestroy {
  static constexpr Call kCall = Call::calbin_destroy;
  using In = OneHandle;
  using Out = DeviceDestroy::Out;
};

struct CalbinGetInfo {
  static constexpr Call kCall = Call::calbin_get_info;
  using In = OneHandle;
  struct Out {
    std::string calbin_version, architecture, runtime_abi;
    uint32_t model_count = 0, chip_count = 0, vocab = 0, context = 0, batch = 0, layers = 0,
             hidden = 0, q_heads = 0, kv_heads = 0, head_dim = 0, prefill_chunk = 0, kv_dtype = 0,
             configured = 0;
    template <class V>
    void visit(V& v) {
      v("calbin_version", calbin_version), v("architecture", architecture);
      v("runtime_abi", runtime_abi), v("model_count", model_count), v("chip_count", chip_count);
      v("vocab", vocab), v("context", context), v("batch", batch), v("layers", layers);
      v("hidden", hidden), v("q_heads", q_heads), v("kv_heads", kv_heads);
      v("head_dim", head_dim), v("prefill_chunk", prefill_chunk), v("kv_dtype", kv_dtype);
      v("configured", configured);
    }
  };
};

struct CalbinGetModel {
  static constexpr Call kCall = Call::calbin_get_model;
  struct In {
    WireHandle calbin;
    uint32_t model_index = 0;
    template <class V>
    void visit(V& v) {
      v("calbin", calbin), v("model_index", model_index);
    }
  };
  struct Out {
    std::string name;
    uint32_t type = 0, input_count = 0, output_count = 0, csr_count = 0;
    template <class V>
    void visit(V& v) {
      v("name", name), v("type", type), v("input_count", input_count);
      v("output_count", output_count), v("csr_count", csr_count);
    }
  };
};

struct CalbinGetTensor {
  static constexpr Call kCall = Call::calbin_get_tensor;
  struct In {
    WireHandle calbin;
    std::optional<std::string> model_name;
    uint32_t direction = 0, index = 0;
    template <class V>
    void visit(V& v) {
      v("calbin", calbin), v("model_name", model_name), v("direction", direction);
      v("index", index);
    }
  };
  struct Out {
    std::string name;
    uint32_t role = 0, dtype = 0, rank = 0;
    std::array<int64_t, CALRT_MAX_RANK> dims{};
    uint32_t layout = 0, tile_d0 = 0;
    uint64_t size_bytes = 0, device_address = 0;
    uint32_t chip_mask = 0;
    template <class V>
    void visit(V& v) {
      v("name", name), v("role", role), v("dtype", dtype), v("rank", rank), v("dims", dims);
      v("layout", layout), v("tile_d0", tile_d0), v("size_bytes", size_bytes);
      v("device_address", device_address), v("chip_mask", chip_mask);
    }
  };
};

struct CalbinGetCsr {
  static constexpr Call kCall = Call::calbin_get_csr;
  struct In {
    WireHandle calbin;
    std::optional<std::string> model_name;
    uint32_t index = 0;
    template <class V>
    void visit(V& v) {
      v("calbin", calbin), v("model_name", model_name), v("index", index);
    }
  };
  struct Out {
    std::string name;
    uint64_t address = 0;
    template <class V>
    void visit(V& v) {
      v("name", name), v("address", address);
    }
  };
};

struct CalbinConfigure {
  static constexpr Call kCall = Call::calbin_configure;
  struct In {
    WireHandle calbin;
    uint64_t timeout_ns = 0;
    template <class V>
    void visit(V& v) {
      v("calbin", calbin), v("timeout_ns", timeout_ns);
    }
  };
  struct Out {
    uint64_t configure_time_ns = 0;
    uint32_t chip_count = 0;
    std::array<uint64_t, CALRT_MAX_CHIPS> memory_used_bytes{};
    template <class V>
    void visit(V& v) {
      v("configure_time_ns", configure_time_ns), v("chip_count", chip_count);
      v("memory_used_bytes", memory_used_bytes);
    }
  };
};

struct BufferCreate {
  static constexpr Call kCall = Call::buffer_create;
  struct In {
    WireHandle calbin;
    std::optional<std::string> model_name;
    uint32_t direction = 0, slot = 0;
    template <class V>
    void visit(V& v) {
      v("calbin", calbin), v("model_name", model_name), v("direction", direction);
      v("slot", slot);
    }
  };
  struct Out {
    WireHandle buffer;
    template <class V>
    void visit(V& v) {
      v("buffer", buffer);
    }
  };
};

struct BufferDestroy {
  static constexpr Call kCall = Call::buffer_destroy;
  using In = OneHandle;
  using Out = DeviceDestroy::Out;
};

// The daemon maps the tensor and keeps it mapped until buffer_unmap; the bytes travel in
// the answer, and the client serves the caller from its own copy.
struct BufferMap {
  static constexpr Call kCall = Call::buffer_map;
  struct In {
    WireHandle buffer;
    uint32_t tensor_index = 0;
    uint64_t timeout_ns = 0;
    template <class V>
    void visit(V& v) {
      v("buffer", buffer), v("tensor_index", tensor_index), v("timeout_ns", timeout_ns);
    }
  };
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
  static constexpr Call kCall = Call::buffer_unmap;
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
  using Out = DeviceDestroy::Out;
};

struct BufferSetCsr {
  static constexpr Call kCall = Call::buffer_set_csr;
  struct In {
    WireHandle buffer;
    uint32_t csr_index = 0;
    uint64_t value = 0;
    template <class V>
    void visit(V& v) {
      v("buffer", buffer), v("csr_index", csr_index), v("value", value);
    }
  };
  using Out = DeviceDestroy::Out;
};

struct BufferGetCsr {
  static constexpr Call kCall = Call::buffer_get_csr;
  struct In {
    WireHandle buffer;
    uint32_t csr_index = 0;
    template <class V>
    void visit(V& v) {
      v("buffer", buffer), v("csr_index", csr_index);
    }
  };
  struct Out {
    uint64_t value = 0;
    template <class V>
    void visit(V& v) {
      v("value", value);
    }
  };
};

struct JobSubmit {
  static constexpr Call kCall = Call::job_submit;
  struct In {
    WireHandle calbin;
    std::optional<std::string> model_name;
    WireHandle input, output;
    template <class V>
    void visit(V& v) {
      v("calbin", calbin), v("model_name", model_name), v("input", input), v("output", output);
    }
  };
  struct Out {
    WireHandle job;
    template <class V>
    void visit(V& v) {
      v("job", job);
    }
  };
};

struct JobStatusOut {
  uint32_t state = 0, code = 0;
  std::string message;
  uint64_t submit_time_ns = 0, start_time_ns = 0, end_time_ns = 0, h2d_end_time_ns = 0,
           compute_end_time_ns = 0, compute_start_time_ns = 0;
  template <class V>
  void visit(V& v) {
    v("state", state), v("code", code), v("message", message);
    v("submit_time_ns", submit_time_ns), v("start_time_ns", start_time_ns);
    v("end_time_ns", end_time_ns), v("h2d_end_time_ns", h2d_end_time_ns);
    v("compute_end_time_ns", compute_end_time_ns);
    v("compute_start_time_ns", compute_start_time_ns);
  }
};

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
  static constexpr Call kCall = Call::job_wait;
  struct In {
    WireHandle job;
    uint64_t timeout_ns = 0;
    // Protocol major 4: tensors of `output` (the job's output buffer) to send back with the
    // answer if the job COMPLETED, so that mapping them needs no round trip.
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
    // Job_Status that follows a wait itself. Protocol major 4.
    std::vector<JobStatusOut> status;
    // The tensors of In::fetch that could be read (none unless COMPLETED).
    std::vector<FetchedTensor> outputs;
    // The job waited for: In::job, or the job a Batch's submit made (protocol major 5).
    WireHandle job;
    template <class V>
    void visit(V& v) {
      v("result", result), v("state", state), v("status", status), v("outputs", outputs);
      v("job", job);
    }
  };
};

struct JobStatus {
  static constexpr Call kCall = Call::job_status;
  using In = OneHandle;
  using Out = JobStatusOut;
};

struct JobCancel {
  static constexpr Call kCall = Call::job_cancel;
  using In = OneHandle;
  using Out = DeviceDestroy::Out;
};

struct JobDestroy {
  static constexpr Call kCall = Call::job_destroy;
  using In = OneHandle;
  using Out = DeviceDestroy::Out;
};

struct KvAllocate {
  static constexpr Call kCall = Call::kv_allocate;
  struct In {
    WireHandle calbin;
    uint32_t capacity_tokens = 0;
    template <class V>
    void visit(V& v) {
      v("calbin", calbin), v("capacity_tokens", capacity_tokens);
    }
  };
  struct Out {
    WireHandle kv;
    template <class V>
    void visit(V& v) {
      v("kv", kv);
    }
  };
};

struct KvApply {
  static constexpr Call kCall = Call::kv_apply;
  struct In {
    WireHandle kv, input;
    uint32_t row = 0;
    template <class V>
    void visit(V& v) {
      v("kv", kv), v("input", input), v("row", row);
    }
  };
  using Out = DeviceDestroy::Out;
};

struct KvFree {
  static constexpr Call kCall = Call::kv_free;
  using In = OneHandle;
  using Out = DeviceDestroy::Out;
};

struct KvClear {
  static constexpr Call kCall = Call::kv_clear;
  using In = OneHandle;
  using Out = DeviceDestroy::Out;
};

struct KvInfo {
  static constexpr Call kCall = Call::kv_info;
  using In = OneHandle;
  struct Out {
    uint32_t capacity_tokens = 0, filled_tokens = 0;
    template <class V>
    void visit(V& v) {
      v("capacity_tokens", capacity_tokens), v("filled_tokens", filled_tokens);
    }
  };
};

struct KvCapacity {
  static constexpr Call kCall = Call::kv_capacity;
  using In = OneHandle;
  struct Out {
    uint64_t total_tokens = 0, free_tokens = 0, largest_free_tokens = 0,
             bytes_per_token_per_chip = 0;
    uint32_t live_handles = 0;
    template <class V>
    void visit(V& v) {
      v("total_tokens", total_tokens), v("free_tokens", free_tokens);
      v("largest_free_tokens", largest_free_tokens);
      v("bytes_per_token_per_chip", bytes_per_token_per_chip), v("live_handles", live_handles);
    }
  };
};

// ---- Extension calls (the device handle first, as in calrt_ext.h) ----------------------

struct ClockGet {
  static constexpr Call kCall = Call::clock_get;
  using In = OneHandle;
  struct Out {
    uint32_t mode = 0;
    uint64_t device_time_ns = 0;
    template <class V>
    void visit(V& v) {
      v("mode", mode), v("device_time_ns", device_time_ns);
    }
  };
};

struct ClockHostSpend {
  static constexpr Call kCall = Call::clock_host_spend;
  struct In {
    WireHandle device;
    uint64_t duration_ns = 0;
    template <class V>
    void visit(V& v) {
      v("device", device), v("duration_ns", duration_ns);
    }
  };
  using Out = DeviceDestroy::Out;
};

struct TraceEnable {
  static constexpr Call kCall = Call::trace_enable;
  struct In {
    WireHandle device;
    uint32_t enable = 0;
    uint64_t capacity_events = 0;
    template <class V>
    void visit(V& v) {
      v("device", device), v("enable", enable), v("capacity_events", capacity_events);
    }
  };
  using Out = DeviceDestroy::Out;
};

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
  static constexpr Call kCall = Call::trace_read;
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
  static constexpr Call kCall = Call::fault_set_plan;
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
  using Out = DeviceDestroy::Out;
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
  static constexpr Call kCall = Call::fault_get_hits;
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
  static constexpr Call kCall = Call::diag_report;
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

struct DiagStateHash {
  static constexpr Call kCall = Call::diag_state_hash;
  using In = OneHandle;
  struct Out {
    uint64_t hash = 0;
    template <class V>
    void visit(V& v) {
      v("hash", hash);
    }
  };
};

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
using AllCalls =
    CallList<DeviceCreate, DeviceDestroy, DeviceStatus, DeviceChipStatus, DeviceReset,
             DeviceSetParallelMode, CalbinCreate, CalbinDestroy, CalbinGetInfo, CalbinGetModel,
             CalbinGetTensor, CalbinGetCsr, CalbinConfigure, BufferCreate, BufferDestroy, BufferMap,
             BufferUnmap, BufferSetCsr, BufferGetCsr, JobSubmit, JobWait, JobStatus, JobCancel,
             JobDestroy, KvAllocate, KvApply, KvFree, KvClear, KvInfo, KvCapacity, ClockGet,
             ClockHostSpend, TraceEnable, TraceRead, FaultSetPlan, FaultGetHits, DiagReport,
             DiagStateHash, Batch>;

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
