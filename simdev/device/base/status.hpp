// Typed status of the simulator: a CalRT code plus a message naming the object and value.
// The device speaks the ABI's codes directly so the runtime layer never has to translate, and
// the client runtime (simdev/service/client) returns the same type before it becomes a
// CalrtError. Header-only, so that the client shares it without linking the device.
#pragma once

#include <string>
#include <utility>

#include <tl/expected.hpp>

#include "abi/calrt.h"

namespace simdev {

// What a failed call reports. Not an injected fault (simdev/device/faults): those are plans
// that make the device produce one of these.
struct Error {
  CalrtCode code = CALRT_INTERNAL;
  std::string message;
};

template <class T>
using Expected = tl::expected<T, Error>;
using Status = Expected<void>;

inline tl::unexpected<Error> fail(CalrtCode code, std::string message) {
  return tl::unexpected<Error>(Error{code, std::move(message)});
}

}  // namespace simdev
