// One client device: its connection (one session of the daemon), the client side of its
// objects, and the strings the ABI lets callers keep. Entries resolve handles here, copy what
// they need under the device's mutex, and make their round trip without holding it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "simdev/device/base/status.hpp"
#include "simdev/service/client/connection.hpp"
#include "simdev/service/client/objects/client_handles.hpp"
#include "simdev/service/client/objects/held_calls.hpp"
#include "simdev/service/client/objects/mapping.hpp"
#include "simdev/service/protocol.hpp"

namespace simdev::service::client {

// Strings handed to callers: node-based, so an address stays valid for the owner's life.
class StringStore {
 public:
  const char* keep(const std::string& text) { return strings_.insert(text).first->c_str(); }

 private:
  std::set<std::string> strings_;
};

// Labels and fault kinds/sites, which the ABI promises in static storage.
const char* intern_static(const std::string& text);

struct ClientCalbin {
  uint64_t wire = 0;  // 0 when re-creating it on a new session failed
  std::string path;   // absolute, as sent
  StringStore strings;
};

struct ClientBuffer {
  uint64_t wire = 0;
  uint32_t serial = 0;  // for messages: the n-th buffer of the device
  bool input = false;
  BufferShadows shadows;
  std::set<uint32_t> csrs_set;  // CSR indices the daemon accepted a Buffer_SetCsr for
  // Output tensors whose shadow holds what the last job wrote (sent with its wait); cleared
  // when the buffer goes to a job again.
  std::set<uint32_t> fetched;
  uint64_t submissions = 0;  // jobs submitted with this buffer
};

struct ClientJob {
  uint64_t wire = 0;
  uint32_t serial = 0;
  std::shared_ptr<ClientBuffer> input, output;
  SubmitSnapshot snapshot;
  bool seen_final = false;
  std::optional<JobStatusOut> final_status;  // sent with a Job_Wait that saw the job final
  uint64_t output_submission = 0;            // the output buffer's `submissions` at submit
  std::optional<std::string> reuse;          // the BUFFER_REUSE message once detected
  StringStore strings;
};

struct ClientKv {
  uint64_t wire = 0;
};

// The `service.*` keys of a Device_Create config and what is left for the daemon.
struct ServiceConfig {
  std::string endpoint;
  std::chrono::milliseconds liveness{2000};
  std::chrono::milliseconds connect_timeout{5000};
  std::optional<std::string> daemon_config;  // nullopt when nothing is left
};
Expected<ServiceConfig> parse_service_config(const char* config);

// The endpoint of calrt_client_get_api(major, endpoint); empty when none was given.
void set_default_endpoint(std::string endpoint);
std::string default_endpoint();

struct ClientDevice {
  std::mutex mutex;
  uint32_t slot = 0;
  LocalId id;
  uint32_t kind = 0, index = 0;
  ServiceConfig config;
  std::shared_ptr<Connection> connection;
  uint64_t wire = 0;  // the daemon's device handle for this session
  // Device time moves only while the host waits: a submit held until its wait starts the
  // job at the same device time (held_calls.hpp). On a paced clock it would start later.
  bool virtual_clock = false;
  ObjectTable<ClientCalbin> calbins;
  ObjectTable<ClientBuffer> buffers;
  ObjectTable<ClientJob> jobs;
  ObjectTable<ClientKv> kvs;
  uint32_t next_serial = 1;
  StringStore strings;
  std::optional<DeviceStatus::Out> last_status;  // served while the device is lost
  std::mutex reconnect_mutex;                    // one Device_Reset reconnects at a time
  HeldCalls held;                                // buffer calls answered here, not yet sent
  // Held calls leave in the order they were made: taking them and sending them is one step.
  std::mutex held_send_mutex;
  // Notified when a held submit's job gets its daemon id, or fails (held_calls.hpp).
  std::condition_variable job_sent;

  std::shared_ptr<Connection> current_connection() {
    std::lock_guard lock(mutex);
    return connection;
  }
  uint64_t wire_id() {
    std::lock_guard lock(mutex);
    return wire;
  }
  bool lost() {
    auto c = current_connection();
    return !c || c->lost();
  }
};

// Opens a connection and attaches a session: Device_Create with the daemon's part of the
// config. On success the connection, the daemon's device handle and its clock.
struct Attached {
  std::shared_ptr<Connection> connection;
  uint64_t wire = 0;
  bool virtual_clock = false;
};
Expected<Attached> attach(const ServiceConfig& config, uint32_t kind, uint32_t index,
                          uint64_t timeout_ns, bool retry);

// One call over a connection: the daemon's answer (its code may be an error), or a fault of
// the transport (DEVICE_LOST) or of a malformed answer (INTERNAL).
template <class C>
Expected<Response<C>> round_trip(Connection& connection, const typename C::In& in) {
  const std::vector<uint8_t> payload = encode_request_payload<C>(in);
  auto answer = connection.call(payload);
  if (!answer) {
    return tl::unexpected(answer.error());
  }
  auto response = decode_response_payload<C>(*answer);
  if (!response) {
    return fail(CALRT_INTERNAL, "malformed answer from the daemon: " + response.error());
  }
  return std::move(*response);
}

// The same on a device's current connection, after the calls it holds; DEVICE_LOST once it
// is lost.
template <class C>
Expected<Response<C>> round_trip(ClientDevice& device, const typename C::In& in) {
  if (Status flushed = flush_held(device); !flushed) {
    return tl::unexpected(flushed.error());
  }
  auto connection = device.current_connection();
  if (!connection) {
    return fail(CALRT_DEVICE_LOST, "the device is lost");
  }
  auto response = round_trip<C>(*connection, in);
  note_answer(device, C::kCall, response ? response->code : uint32_t{CALRT_DEVICE_LOST});
  return response;
}

// The response's code and message as a Status.
template <class C>
Status status_of(const Response<C>& response) {
  if (response.code == CALRT_OK) {
    return {};
  }
  return fail(static_cast<CalrtCode>(response.code), response.message);
}

// A resolved handle: its device and object, found under the device's mutex.
template <class T>
struct Resolved {
  std::shared_ptr<ClientDevice> device;
  std::shared_ptr<T> object;
  LocalId id;
  uint64_t wire = 0;  // the object's id in the current session, read under the mutex
};

Expected<std::shared_ptr<ClientDevice>> resolve_device(const void* handle, const char* what);
Expected<Resolved<ClientCalbin>> resolve_calbin(const void* handle, const char* what);
Expected<Resolved<ClientBuffer>> resolve_buffer(const void* handle, const char* what);
Expected<Resolved<ClientJob>> resolve_job(const void* handle, const char* what);
Expected<Resolved<ClientKv>> resolve_kv(const void* handle, const char* what);
// A second handle of a call: a buffer of the same device.
Expected<Resolved<ClientBuffer>> resolve_buffer_of(ClientDevice& device, const void* handle,
                                                   const char* what);

// A lost device answers DEVICE_LOST; this is the one check every forwarding entry makes.
Error lost_fault(ClientDevice& device);

}  // namespace simdev::service::client
