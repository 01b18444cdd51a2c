#include "simdev/service/client/objects/client_device.hpp"

#include <charconv>
#include <cstdlib>

#include "abi/calrt_ext.h"

namespace simdev::service::client {
namespace {

std::string trim(std::string text) {
  const char* space = " \t\r\n";
  const size_t begin = text.find_first_not_of(space);
  if (begin == std::string::npos) return {};
  const size_t end = text.find_last_not_of(space);
  return text.substr(begin, end - begin + 1);
}

Expected<std::chrono::milliseconds> parse_ms(const std::string& key, const std::string& value) {
  uint64_t ms = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, ms);
  if (ec != std::errc() || ptr != end || ms == 0 || ms > 3'600'000) {
    return fail(CALRT_INVALID_ARGUMENT, "config key '" + key + "': '" + value +
                                            "' is not a number of milliseconds in [1, 3600000]");
  }
  return std::chrono::milliseconds(ms);
}

struct DefaultEndpoint {
  std::mutex mutex;
  std::string endpoint;
};

DefaultEndpoint& default_endpoint_store() {
  static auto* instance = new DefaultEndpoint();  // never destroyed: safe during teardown
  return *instance;
}

template <class T>
Expected<Resolved<T>> resolve_object(const void* handle, HandleKind kind, const char* what,
                                     ObjectTable<T> ClientDevice::*table) {
  const auto decoded = decode_handle(reinterpret_cast<uintptr_t>(handle), kind);
  std::shared_ptr<ClientDevice> device = decoded ? find_device_at(decoded->first) : nullptr;
  if (device) {
    std::lock_guard lock(device->mutex);
    if (auto object = ((*device).*table).share(decoded->second)) {
      const uint64_t wire = object->wire;
      return Resolved<T>{std::move(device), std::move(object), decoded->second, wire};
    }
  }
  return fail(CALRT_INVALID_HANDLE, std::string(what) + " handle " + handle_text(handle) +
                                        " was released or never issued");
}

}  // namespace

const char* intern_static(const std::string& text) {
  static auto* mutex = new std::mutex();
  static auto* store = new StringStore();  // never destroyed: the ABI promises static storage
  std::lock_guard lock(*mutex);
  return store->keep(text);
}

Expected<ServiceConfig> parse_service_config(const char* config) {
  ServiceConfig out;
  std::string rest;
  bool any_left = false;
  std::string text = config == nullptr ? std::string() : std::string(config);
  size_t begin = 0;
  while (config != nullptr && begin <= text.size()) {
    size_t end = text.find(';', begin);
    if (end == std::string::npos) end = text.size();
    const std::string segment = text.substr(begin, end - begin);
    begin = end + 1;
    const size_t eq = segment.find('=');
    const std::string key = trim(segment.substr(0, eq));
    if (key.rfind("service.", 0) != 0) {
      if (!trim(segment).empty()) {
        rest += (any_left ? ";" : "") + segment;
        any_left = true;
      }
      continue;
    }
    const std::string value =
        eq == std::string::npos ? std::string() : trim(segment.substr(eq + 1));
    if (key == "service.endpoint") {
      out.endpoint = value;
    } else if (key == "service.liveness_ms") {
      auto ms = parse_ms(key, value);
      if (!ms) return tl::unexpected(ms.error());
      out.liveness = *ms;
    } else if (key == "service.connect_timeout_ms") {
      auto ms = parse_ms(key, value);
      if (!ms) return tl::unexpected(ms.error());
      out.connect_timeout = *ms;
    } else {
      return fail(CALRT_INVALID_ARGUMENT,
                  "config key '" + key +
                      "' is unknown (the client knows service.endpoint, service.liveness_ms, "
                      "service.connect_timeout_ms)");
    }
  }
  if (any_left) out.daemon_config = rest;
  if (out.endpoint.empty()) out.endpoint = default_endpoint();
  if (out.endpoint.empty()) {
    if (const char* env = std::getenv("CALRT_SERVICE")) out.endpoint = env;
  }
  if (out.endpoint.empty()) {
    return fail(CALRT_INVALID_ARGUMENT,
                "no service endpoint: set the config key service.endpoint, pass --device "
                "unix:SOCKET, or set CALRT_SERVICE");
  }
  return out;
}

void set_default_endpoint(std::string endpoint) {
  DefaultEndpoint& store = default_endpoint_store();
  std::lock_guard lock(store.mutex);
  store.endpoint = std::move(endpoint);
}

std::string default_endpoint() {
  DefaultEndpoint& store = default_endpoint_store();
  std::lock_guard lock(store.mutex);
  return store.endpoint;
}

Expected<Attached> attach(const ServiceConfig& config, uint32_t kind, uint32_t index,
                          uint64_t timeout_ns, bool retry) {
  ConnectOptions options;
  options.endpoint = config.endpoint;
  options.connect_timeout = config.connect_timeout;
  options.liveness = config.liveness;
  options.retry_until_timeout = retry;
  auto connection = Connection::open(options);
  if (!connection) {
    return tl::unexpected(connection.error());
  }
  DeviceCreate::In in;
  in.kind = kind;
  in.index = index;
  in.config = config.daemon_config;
  in.timeout_ns = timeout_ns;
  auto response = round_trip<DeviceCreate>(**connection, in);
  Status ok = response ? status_of(*response) : Status(tl::unexpected(response.error()));
  if (!ok) {
    (*connection)->close();
    return tl::unexpected(ok.error());
  }
  return Attached{std::move(*connection), response->out.device.id,
                  response->out.clock_mode == CALRT_CLOCK_VIRTUAL};
}

Expected<std::shared_ptr<ClientDevice>> resolve_device(const void* handle, const char* what) {
  const auto decoded = decode_handle(reinterpret_cast<uintptr_t>(handle), HandleKind::kDevice);
  std::shared_ptr<ClientDevice> device =
      decoded && decoded->second.index == 0
          ? find_device(decoded->first, decoded->second.generation)
          : nullptr;
  if (!device) {
    return fail(CALRT_INVALID_HANDLE, std::string(what) + " handle " + handle_text(handle) +
                                          " was released or never issued");
  }
  return device;
}

Expected<Resolved<ClientCalbin>> resolve_calbin(const void* handle, const char* what) {
  return resolve_object(handle, HandleKind::kCalbin, what, &ClientDevice::calbins);
}
Expected<Resolved<ClientBuffer>> resolve_buffer(const void* handle, const char* what) {
  return resolve_object(handle, HandleKind::kBuffer, what, &ClientDevice::buffers);
}
Expected<Resolved<ClientJob>> resolve_job(const void* handle, const char* what) {
  return resolve_object(handle, HandleKind::kJob, what, &ClientDevice::jobs);
}
Expected<Resolved<ClientKv>> resolve_kv(const void* handle, const char* what) {
  return resolve_object(handle, HandleKind::kKv, what, &ClientDevice::kvs);
}

Expected<Resolved<ClientBuffer>> resolve_buffer_of(ClientDevice& device, const void* handle,
                                                   const char* what) {
  const auto decoded = decode_handle(reinterpret_cast<uintptr_t>(handle), HandleKind::kBuffer);
  if (decoded && decoded->first == device.slot) {
    std::lock_guard lock(device.mutex);
    if (auto object = device.buffers.share(decoded->second)) {
      const uint64_t wire = object->wire;
      return Resolved<ClientBuffer>{nullptr, std::move(object), decoded->second, wire};
    }
  }
  return fail(CALRT_INVALID_HANDLE, std::string(what) + " handle " + handle_text(handle) +
                                        " was released, never issued or is of another device");
}

Error lost_fault(ClientDevice& device) {
  auto connection = device.current_connection();
  const std::string why = connection ? connection->lost_reason() : std::string("not connected");
  return Error{CALRT_DEVICE_LOST, "the device at " + device.config.endpoint + " is lost (" + why +
                                      "); Device_Reset reconnects"};
}

}  // namespace simdev::service::client
