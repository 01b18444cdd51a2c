#include "simdev/service/client/objects/client_errors.hpp"

#include <mutex>
#include <string>
#include <unordered_set>

namespace simdev::service::client {
namespace {

// Its own type: CalrtError is opaque, and the in-process simulator, which may be linked into
// the same program, defines its own.
struct ClientError {
  CalrtCode code = CALRT_INTERNAL;
  std::string message;
};

struct ErrorRegistry {
  std::mutex mutex;
  std::unordered_set<const ClientError*> live;
};

ErrorRegistry& error_registry() {
  static auto* instance = new ErrorRegistry();  // outlives static destructors
  return *instance;
}

ClientError out_of_memory_error{CALRT_INTERNAL, "out of host memory while reporting an error"};

const ClientError* as_client(const CalrtError* error) {
  return reinterpret_cast<const ClientError*>(error);
}

}  // namespace

CalrtError* make_error(CalrtCode code, std::string message) noexcept {
  try {
    auto* error = new ClientError{code, std::move(message)};
    ErrorRegistry& r = error_registry();
    std::lock_guard lock(r.mutex);
    r.live.insert(error);
    return reinterpret_cast<CalrtError*>(error);
  } catch (...) {
    return reinterpret_cast<CalrtError*>(&out_of_memory_error);
  }
}

bool error_fields(const CalrtError* error, CalrtCode* code, const char** message,
                  size_t* message_size) noexcept {
  const ClientError* e = as_client(error);
  if (e != &out_of_memory_error) {
    ErrorRegistry& r = error_registry();
    std::lock_guard lock(r.mutex);
    if (r.live.count(e) == 0) {
      return false;
    }
  }
  if (code != nullptr) *code = e->code;
  if (message != nullptr) *message = e->message.c_str();
  if (message_size != nullptr) *message_size = e->message.size();
  return true;
}

void destroy_error(CalrtError* error) noexcept {
  const ClientError* e = as_client(error);
  if (e == nullptr || e == &out_of_memory_error) {
    return;
  }
  {
    ErrorRegistry& r = error_registry();
    std::lock_guard lock(r.mutex);
    if (r.live.erase(e) == 0) {
      return;  // forged or already destroyed: ignore rather than double free
    }
  }
  delete e;
}

}  // namespace simdev::service::client
