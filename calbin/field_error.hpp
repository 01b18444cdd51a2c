// Internal to the calbin library: the error the readers throw inside themselves.
#pragma once

#include <string>

namespace calbin::detail {

// Thrown by the readers' helpers and caught once at each reader's entry point. A bad field at
// any depth ends the whole parse; carrying it as an exception keeps every field read to one
// line instead of a ladder of early returns. It never crosses the library's API.
struct FieldError {
  std::string field;
  std::string message;
};

}  // namespace calbin::detail
