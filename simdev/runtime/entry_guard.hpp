// The first lines of every entry point: args must be non-NULL and at least as large as this
// ABI version's struct; a larger (newer) struct is accepted. Exceptions never cross the C
// boundary: they become CALRT_INTERNAL errors.
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>

#include "simdev/runtime/errors.hpp"

namespace simdev::runtime {

// The value a caller stored in an enum field. A C caller may store any int there, and
// loading a value outside the enum's range through the enum type is undefined behaviour in
// C++; copying its bytes is not. Entries validate this value before converting it.
template <class Enum>
int64_t raw_enum(const Enum& field) noexcept {
  static_assert(std::is_enum_v<Enum>);
  std::underlying_type_t<Enum> value{};
  std::memcpy(&value, &field, sizeof value);
  return static_cast<int64_t>(value);
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

// Runs body (returning Status) behind the argument check and an exception barrier.
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

}  // namespace simdev::runtime
