#include "simdev/service/server/calls/device_host.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace simdev::service::server {
namespace {

std::string canonical(ConfigEntries entries) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return join_config(entries);
}

}  // namespace

Failure take_error(const CalrtApi* api, CalrtError* error) {
  if (error == nullptr) return {};
  auto code_args = make_args<Calrt_Error_GetCode_Args>();
  code_args.error = error;
  api->Error_GetCode(&code_args);
  auto message_args = make_args<Calrt_Error_Message_Args>();
  message_args.error = error;
  api->Error_Message(&message_args);
  Failure failure;
  put_enum(failure.code, get_enum(code_args.code));  // the raw value, an enumerator or not
  if (message_args.message != nullptr) {
    failure.message.assign(message_args.message, message_args.message_size);
  }
  auto destroy_args = make_args<Calrt_Error_Destroy_Args>();
  destroy_args.error = error;
  api->Error_Destroy(&destroy_args);
  // A runtime that reports an error with code 0 would read as success on the wire.
  if (failure.code == CALRT_OK) failure.code = CALRT_INTERNAL;
  return failure;
}

const CalrtExtensionBase* find_extension(const CalrtApi* api, CalrtExtensionType type,
                                         size_t min_size) {
  for (auto* ext = static_cast<const CalrtExtensionBase*>(api->extension); ext != nullptr;
       ext = ext->next) {
    if (get_enum(ext->type) == static_cast<uint32_t>(type) && ext->struct_size >= min_size) {
      return ext;
    }
  }
  return nullptr;
}

ConfigEntries parse_config(const std::string& text) {
  ConfigEntries entries;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    if (!item.empty()) {
      const size_t eq = item.find('=');
      // An item without '=' is kept whole as its key, so the runtime still sees it and
      // refuses it with its own message.
      if (eq == std::string::npos) {
        entries.emplace_back(item, std::string());
      } else {
        entries.emplace_back(item.substr(0, eq), item.substr(eq + 1));
      }
    }
    start = end + 1;
  }
  return entries;
}

ConfigEntries merge_config(ConfigEntries base, const ConfigEntries& top) {
  for (const auto& entry : top) {
    auto it = std::find_if(base.begin(), base.end(),
                           [&](const auto& e) { return e.first == entry.first; });
    if (it != base.end()) {
      it->second = entry.second;
    } else {
      base.push_back(entry);
    }
  }
  return base;
}

std::string join_config(const ConfigEntries& entries) {
  std::string out;
  for (const auto& [key, value] : entries) {
    if (!out.empty()) out += ';';
    out += key;
    if (!value.empty()) out += "=" + value;
  }
  return out;
}

DeviceHost::DeviceHost(const CalrtApi* api, std::string daemon_config)
    : api_(api), daemon_config_(parse_config(daemon_config)) {}

DeviceHost::~DeviceHost() { destroy_now(); }

tl::expected<CalrtDevice*, Failure> DeviceHost::attach(
    uint32_t kind_raw, uint32_t index, const std::optional<std::string>& client_config,
    uint64_t timeout_ns) {
  const ConfigEntries client = parse_config(client_config.value_or(std::string()));
  for (const auto& [key, value] : client) {
    // The daemon reads files with its own rights, for whoever connects: a client's config
    // file would let any local user probe and read files it cannot (its contents end up in
    // the error message). Config files come from the daemon's --device-config only.
    if (key == "config") {
      return tl::unexpected(
          Failure{CALRT_INVALID_ARGUMENT,
                  "Device_Create: the key 'config' (a device config file) is not accepted over the "
                  "service; the daemon reads config files from its own --device-config only"});
    }
  }
  const ConfigEntries merged = merge_config(daemon_config_, client);
  const std::string config = join_config(merged);
  const std::string canon = canonical(merged);
  if (device_ != nullptr) {
    if (kind_raw != kind_raw_ || index != index_) {
      return tl::unexpected(Failure{
          CALRT_BUSY, "Device_Create: the shared device is kind " + std::to_string(kind_raw_) +
                          " index " + std::to_string(index_) + "; this client asks for kind " +
                          std::to_string(kind_raw) + " index " + std::to_string(index)});
    }
    if (canon != canonical_) {
      // Only this client's own config is echoed: the shared one belongs to other sessions and
      // may hold their paths.
      return tl::unexpected(
          Failure{CALRT_BUSY,
                  "Device_Create: the shared device runs with another session's config; "
                  "this client asks for config '" +
                      config + "' (another config needs the device to itself)"});
    }
    ++users_;
    return device_;
  }
  auto args = make_args<Calrt_Device_Create_Args>();
  put_enum(args.kind, kind_raw);
  args.index = index;
  args.config = config.empty() ? nullptr : config.c_str();
  args.timeout_ns = timeout_ns;
  Failure failure = take_error(api_, api_->Device_Create(&args));
  if (!failure.ok()) return tl::unexpected(std::move(failure));
  device_ = args.device;
  trace_.device_created();
  users_ = 1;
  kind_raw_ = kind_raw;
  index_ = index;
  config_ = config;
  canonical_ = canon;
  spdlog::info("device created (config '{}')", config_);
  return device_;
}

Failure DeviceHost::detach() {
  if (users_ == 0) return {};
  if (--users_ > 0) return {};
  auto args = make_args<Calrt_Device_Destroy_Args>();
  args.device = device_;
  device_ = nullptr;
  Failure failure = take_error(api_, api_->Device_Destroy(&args));
  spdlog::info("device destroyed: its last session detached");
  return failure;
}

TraceDemux::Device DeviceHost::trace_device() const {
  return {api_,
          reinterpret_cast<const CalrtTraceExtension*>(
              find_extension(api_, CALRT_EXT_TRACE, CALRT_TRACE_EXTENSION_STRUCT_SIZE)),
          device_};
}

bool DeviceHost::running() const {
  if (device_ == nullptr) return false;
  auto args = make_args<Calrt_Device_Status_Args>();
  args.device = device_;
  if (const Failure f = take_error(api_, api_->Device_Status(&args)); !f.ok()) return false;
  return get_enum(args.state) == CALRT_DEVICE_RUNNING;
}

void DeviceHost::destroy_now() {
  if (device_ == nullptr) return;
  users_ = 1;
  const Failure failure = detach();
  if (!failure.ok()) spdlog::warn("device destroy at shutdown: {}", failure.message);
}

}  // namespace simdev::service::server
