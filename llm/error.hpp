// The adapter's one error type. Every request ends with exactly one outcome, and a failed
// outcome carries one of these: which party is at fault (kind), what happened (code), whether
// the same request may succeed if sent again (retryable), and a message naming the object and
// the values involved. The library never throws out of its API: results are tl::expected.
#pragma once

#include <string>
#include <string_view>

#include <tl/expected.hpp>

#include "abi/calrt.hpp"

namespace calrt::llm {

// Whose fault: the request's (its input or its limits), the model's (the calbin does not fit
// the manifest, or is unusable), or the device's (it needs a reset).
enum class ErrorKind { request, model, device };

enum class ErrorCode {
  invalid_request,    // malformed: empty prompt, token outside the vocabulary, bad sampling
  context_exceeded,   // the prompt or prompt + generation does not fit n_ctx
  cancelled,          // cancel() before the request ended
  queue_full,         // the bounded queue is full; retryable
  timeout,            // a bounded wait ran out (a job that never finished is a device fault)
  kv_exhausted,       // the KV reservation cannot hold the request, even alone
  model_mismatch,     // start-up contract check failed: manifest, calbin and device disagree
  model_unavailable,  // a model fault stopped this calbin; no new work is taken
  device_fault,       // the device failed; in-flight requests get this, retryable
  internal,           // a defect of this library
};

const char* to_string(ErrorKind kind);
const char* to_string(ErrorCode code);

struct Error {
  ErrorKind kind = ErrorKind::request;
  ErrorCode code = ErrorCode::internal;
  std::string message;
  CalrtCode runtime_code = CALRT_OK;  // the runtime's code when one caused this, else OK

  // Whether sending the same request again may succeed: after a device fault (the engine
  // resets and reopens the device) and when the queue was full.
  bool retryable() const {
    return kind == ErrorKind::device || code == ErrorCode::queue_full || code == ErrorCode::timeout;
  }
  // "request context_exceeded: prompt of 70 tokens ..."
  std::string to_string() const;
};

template <class T>
using Result = tl::expected<T, Error>;

Error request_error(ErrorCode code, std::string message);
Error model_error(ErrorCode code, std::string message);
Error device_error(std::string message, CalrtCode runtime_code = CALRT_OK);

// A runtime error mapped to the adapter's classes by the code's fault class (calrt.h):
// request-class codes stay the request's, model-class codes make the model unavailable,
// device-class codes are device faults. `where` says what the adapter was doing.
Error from_runtime(const calrt::Error& error, std::string_view where);
Error from_runtime_code(CalrtCode code, std::string_view message, std::string_view where);

}  // namespace calrt::llm
