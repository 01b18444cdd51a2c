// What a client call returns before it becomes a CalrtError: a code and a message.
#pragma once

#include <string>

#include <tl/expected.hpp>

#include "abi/calrt.h"

namespace simdev::service::client {

struct Fault {
  CalrtCode code = CALRT_INTERNAL;
  std::string message;
};

using Status = tl::expected<void, Fault>;
template <class T>
using Expected = tl::expected<T, Fault>;

inline tl::unexpected<Fault> fail(CalrtCode code, std::string message) {
  return tl::unexpected(Fault{code, std::move(message)});
}

}  // namespace simdev::service::client
