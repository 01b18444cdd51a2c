#include "simdev/runtime/errors.hpp"

#include <mutex>
#include <unordered_set>

namespace simdev::runtime {
namespace {

std::mutex& registry_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::unordered_set<const CalrtError*>& error_registry() {
  static auto* live = new std::unordered_set<const CalrtError*>();  // outlives static dtors
  return *live;
}

CalrtError out_of_memory_error{CALRT_INTERNAL, "out of host memory while reporting an error"};

}  // namespace

CalrtError* make_error(CalrtCode code, std::string message) noexcept {
  try {
    auto* error = new CalrtError{code, std::move(message)};
    std::lock_guard lock(registry_mutex());
    error_registry().insert(error);
    return error;
  } catch (...) {
    return &out_of_memory_error;
  }
}

bool is_live_error(const CalrtError* error) noexcept {
  if (error == &out_of_memory_error) {
    return true;
  }
  std::lock_guard lock(registry_mutex());
  return error_registry().count(error) > 0;
}

void destroy_error(CalrtError* error) noexcept {
  if (error == nullptr || error == &out_of_memory_error) {
    return;
  }
  {
    std::lock_guard lock(registry_mutex());
    if (error_registry().erase(error) == 0) {
      return;  // forged or already destroyed: ignore rather than double free
    }
  }
  delete error;
}

}  // namespace simdev::runtime
