// The first lines of every entry: args non-NULL and at least as large as this ABI version's
// struct (a larger, newer struct is accepted), exceptions turned into INTERNAL errors, as
// the simulator's entries do; and the forwarding of one call to the daemon.
#pragma once

#include <cstring>
#include <exception>
#include <string>
#include <type_traits>

#include "simdev/service/client/objects/client_device.hpp"
#include "simdev/service/client/objects/client_errors.hpp"

namespace simdev::service::client {

// The value a caller stored in an enum field, read without loading it through the enum
// type (a value outside the enum's range would be undefined behaviour).
template <class Enum>
int64_t raw_enum(const Enum& field) noexcept {
  static_assert(std::is_enum_v<Enum>);
  std::underlying_type_t<Enum> value{};
  std::memcpy(&value, &field, sizeof value);
  return static_cast<int64_t>(value);
}
template <class Enum>
uint32_t wire_enum(const Enum& field) noexcept {
  return static_cast<uint32_t>(raw_enum(field));
}

template <class Args>
CalrtError* check_args(const Args* args, size_t min_size, const char* struct_name) noexcept {
  if (args == nullptr) {
    return make_error(CALRT_INVALID_ARGUMENT, std::string(struct_name) + " pointer is NULL");
  }
  if (args->struct_size < min_size) {
    return make_error(CALRT_STRUCT_TOO_SMALL, std::string(struct_name) + ": struct_size " +
                                                  std::to_string(args->struct_size) + " < " +
                                                  std::to_string(min_size) + " required by ABI " +
                                                  std::to_string(CALRT_ABI_MAJOR) + "." +
                                                  std::to_string(CALRT_ABI_MINOR));
  }
  return nullptr;
}

template <class Args, class Body>
CalrtError* guarded(Args* args, size_t min_size, const char* struct_name, Body&& body) noexcept {
  if (CalrtError* error = check_args(args, min_size, struct_name)) {
    return error;
  }
  try {
    return to_error(body());
  } catch (const std::exception& e) {
    return make_error(CALRT_INTERNAL, std::string(struct_name) + ": exception: " + e.what());
  } catch (...) {
    return make_error(CALRT_INTERNAL, std::string(struct_name) + ": unknown exception");
  }
}

// Sends one call and, when the daemon answers success, hands its Out to fill.
template <class C, class Fill>
Status forward(ClientDevice& device, const typename C::In& in, Fill&& fill) {
  auto response = round_trip<C>(device, in);
  if (!response) {
    return tl::unexpected(response.error());
  }
  if (Status ok = status_of(*response); !ok) {
    return ok;
  }
  return fill(response->out);
}

template <class C>
Status forward(ClientDevice& device, const typename C::In& in) {
  return forward<C>(device, in, [](const typename C::Out&) -> Status { return {}; });
}

inline std::optional<std::string> optional_string(const char* text) {
  return text == nullptr ? std::nullopt : std::optional<std::string>(text);
}

}  // namespace simdev::service::client
