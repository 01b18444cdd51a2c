// Error objects crossing the C boundary: a code and a message, owned by the caller until
// Error_Destroy. Live errors are tracked, so destroying a forged or already destroyed error
// is ignored instead of corrupting the heap.
#pragma once

#include <string>

#include "abi/calrt.h"
#include "simdev/device/base/status.hpp"

struct CalrtError {
  CalrtCode code = CALRT_INTERNAL;
  std::string message;
};

namespace simdev::runtime {

// Never throws: when memory runs out it returns a static error that Error_Destroy ignores.
CalrtError* make_error(CalrtCode code, std::string message) noexcept;
inline CalrtError* make_error(const Error& fault) noexcept {
  return make_error(fault.code, fault.message);
}
// nullptr on success.
inline CalrtError* to_error(const Status& status) noexcept {
  return status ? nullptr : make_error(status.error());
}

// True for an error make_error returned that was not destroyed yet.
bool is_live_error(const CalrtError* error) noexcept;
void destroy_error(CalrtError* error) noexcept;

}  // namespace simdev::runtime
