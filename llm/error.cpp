#include "llm/error.hpp"

namespace calrt::llm {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::request:
      return "request";
    case ErrorKind::model:
      return "model";
    case ErrorKind::device:
      return "device";
  }
  return "?";
}

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_request:
      return "invalid_request";
    case ErrorCode::context_exceeded:
      return "context_exceeded";
    case ErrorCode::cancelled:
      return "cancelled";
    case ErrorCode::queue_full:
      return "queue_full";
    case ErrorCode::timeout:
      return "timeout";
    case ErrorCode::kv_exhausted:
      return "kv_exhausted";
    case ErrorCode::model_mismatch:
      return "model_mismatch";
    case ErrorCode::model_unavailable:
      return "model_unavailable";
    case ErrorCode::device_fault:
      return "device_fault";
    case ErrorCode::internal:
      return "internal";
  }
  return "?";
}

std::string Error::to_string() const {
  return std::string(llm::to_string(kind)) + " " + llm::to_string(code) + ": " + message;
}

Error request_error(ErrorCode code, std::string message) {
  return Error{ErrorKind::request, code, std::move(message), CALRT_OK};
}

Error model_error(ErrorCode code, std::string message) {
  return Error{ErrorKind::model, code, std::move(message), CALRT_OK};
}

Error device_error(std::string message, CalrtCode runtime_code) {
  return Error{ErrorKind::device, ErrorCode::device_fault, std::move(message), runtime_code};
}

Error from_runtime_code(CalrtCode code, std::string_view message, std::string_view where) {
  const std::string text =
      std::string(where) + ": " + calrt::code_name(code) + ": " + std::string(message);
  switch (calrt::fault_class_of(code)) {
    case calrt::FaultClass::request: {
      const ErrorCode mapped = code == CALRT_CANCELLED      ? ErrorCode::cancelled
                               : code == CALRT_KV_EXHAUSTED ? ErrorCode::kv_exhausted
                                                            : ErrorCode::invalid_request;
      return Error{ErrorKind::request, mapped, text, code};
    }
    case calrt::FaultClass::model:
      return Error{ErrorKind::model, ErrorCode::model_unavailable, text, code};
    case calrt::FaultClass::device:
      break;
  }
  return device_error(text, code);
}

Error from_runtime(const calrt::Error& error, std::string_view where) {
  return from_runtime_code(error.code(), error.function() + ": " + error.message(), where);
}

}  // namespace calrt::llm
