// The client's CalrtError objects: rebuilt from the code and message of a response (errors
// never cross the wire) or made here. Live errors are tracked, so that destroying a forged
// or destroyed error is ignored, as the simulator does.
#pragma once

#include "abi/calrt.h"
#include "simdev/device/base/status.hpp"

namespace simdev::service::client {

// Never throws: when memory runs out it returns a static error that destroy ignores.
CalrtError* make_error(CalrtCode code, std::string message) noexcept;
inline CalrtError* to_error(const Status& status) noexcept {
  return status ? nullptr : make_error(status.error().code, status.error().message);
}

// The fields of a live error; false (nothing written) for one that is not live.
bool error_fields(const CalrtError* error, CalrtCode* code, const char** message,
                  size_t* message_size) noexcept;
void destroy_error(CalrtError* error) noexcept;

}  // namespace simdev::service::client
