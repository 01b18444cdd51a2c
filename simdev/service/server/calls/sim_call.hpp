// sim_call.hpp: small helpers around the simulator's C table: turning a CalrtError* into a
// code and message, storing and reading enum fields by their raw value, and finding an
// extension in the table's chain.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "abi/calrt.h"
#include "abi/calrt_ext.h"
#include "simdev/device/base/status.hpp"

namespace simdev::service::server {

// A call's outcome as it crosses the wire: the simulator's Error (base/status.hpp), with
// CALRT_OK for a call that succeeded.
struct Failure : Error {
  Failure() : Error{CALRT_OK, {}} {}
  Failure(CalrtCode code_in, std::string message_in) : Error{code_in, std::move(message_in)} {}
  bool ok() const { return code == CALRT_OK; }
};

// Consumes the error (releases it through the table).
Failure take_error(const CalrtApi* api, CalrtError* error);

// The wire carries enums as raw u32; copying the bytes stores a value that names no
// enumerator without undefined behaviour, and the runtime then refuses it by value.
template <class Enum>
void put_enum(Enum& field, uint32_t raw) {
  static_assert(std::is_enum_v<Enum> && sizeof(Enum) == sizeof(uint32_t));
  std::memcpy(&field, &raw, sizeof raw);
}
template <class Enum>
uint32_t get_enum(const Enum& field) {
  static_assert(std::is_enum_v<Enum> && sizeof(Enum) == sizeof(uint32_t));
  uint32_t raw = 0;
  std::memcpy(&raw, &field, sizeof raw);
  return raw;
}

// The extension of that type whose struct covers min_size, or nullptr.
const CalrtExtensionBase* find_extension(const CalrtApi* api, CalrtExtensionType type,
                                         size_t min_size);

template <class Args>
Args make_args() {
  Args args{};
  args.struct_size = sizeof(Args);
  return args;
}

}  // namespace simdev::service::server
