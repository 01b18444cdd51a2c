// Typed status of the device model: a CalRT code plus a message naming the object and value.
// The device speaks the ABI's codes directly so the runtime layer never has to translate.
#pragma once

#include <string>
#include <utility>

#include <tl/expected.hpp>

#include "abi/calrt.h"

namespace simdev {

struct Fault {
  CalrtCode code = CALRT_INTERNAL;
  std::string message;
};

template <class T>
using Expected = tl::expected<T, Fault>;
using Status = Expected<void>;

inline tl::unexpected<Fault> fail(CalrtCode code, std::string message) {
  return tl::unexpected<Fault>(Fault{code, std::move(message)});
}

}  // namespace simdev
