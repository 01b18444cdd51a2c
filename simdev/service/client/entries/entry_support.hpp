// The first lines of every entry: args non-NULL and at least as large as this ABI version's
// struct (a larger, newer struct is accepted), exceptions turned into INTERNAL errors, as
// the simulator's entries do; and the forwarding of one call to the daemon.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <iterator>
#include <optional>
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

// Whether the caller's struct holds `field`: a caller built against an older calrt.h passes
// a struct that ends before the fields appended since, which are neither read nor written.
template <class Args, class Field>
bool covers(const Args& args, const Field& field) noexcept {
  const auto offset = reinterpret_cast<const char*>(&field) - reinterpret_cast<const char*>(&args);
  return args.struct_size >= static_cast<size_t>(offset) + sizeof(Field);
}

// Copies between a caller's args struct and the messages of its call, field by field as the
// call table lists them (protocol.hpp's zip). Handles are left to the entry, which resolves
// them against the client's own tables first.
namespace wire_copy {

template <class T>
void to_wire(WireHandle&, T* const&) {}
template <class E>
requires std::is_enum_v<E>
void to_wire(uint32_t& wire, const E& field) { wire = wire_enum(field); }
inline void to_wire(std::optional<std::string>& wire, const char* const& field) {
  wire = optional_string(field);
}
template <class T>
requires std::is_integral_v<T>
void to_wire(T& wire, const T& field) { wire = field; }

// Answers of calls that return no string.
struct NoStrings {};

template <class T, class Strings>
void from_wire(T*&, const WireHandle&, Strings&) {}
template <class E, class Strings>
requires std::is_enum_v<E>
void from_wire(E& field, uint32_t wire, Strings&) {
  static_assert(sizeof(E) == sizeof(uint32_t));
  std::memcpy(&field, &wire, sizeof wire);  // by value: the caller range-checks it
}
inline void from_wire(const char*& field, const std::string& wire, StringStore& strings) {
  field = strings.keep(wire);
}
template <class T, class Strings>
requires std::is_integral_v<T>
void from_wire(T& field, const T& wire, Strings&) { field = wire; }
template <class T, size_t N, class Strings>
void from_wire(T (&field)[N], const std::array<T, N>& wire, Strings&) {
  std::copy(wire.begin(), wire.end(), std::begin(field));
}

}  // namespace wire_copy

// The request of call C with the caller's in fields; its handles are still 0.
template <class C>
typename C::In wire_in(const typename C::Args& args) {
  typename C::In in{};
  C::In::zip(in, args, [&](const char*, auto& wire, const auto& field) {
    if (covers(args, field)) wire_copy::to_wire(wire, field);
  });
  return in;
}

// Writes the daemon's answer into the caller's out fields; returned strings are kept by
// `strings`, the object that owns them as calrt.h says (call with its device's mutex held).
template <class C, class Strings>
void fill_outs(const typename C::Out& out, typename C::Args& args, Strings& strings) {
  C::Out::zip(out, args, [&](const char*, const auto& wire, auto& field) {
    if (covers(args, field)) wire_copy::from_wire(field, wire, strings);
  });
}
template <class C>
void fill_outs(const typename C::Out& out, typename C::Args& args) {
  wire_copy::NoStrings none;
  fill_outs<C>(out, args, none);
}

}  // namespace simdev::service::client
