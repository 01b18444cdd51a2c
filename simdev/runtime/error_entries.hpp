// The ABI's three Error_* entry points, for both of the project's runtimes (the simulator
// here, the service client in simdev/service/client): each supplies how it finds an error
// object's fields and how it releases one. They never fail: a too-small struct or an error
// that is not live is answered with a neutral value instead.
#pragma once

#include <cstddef>

#include "abi/calrt.h"

namespace simdev::error_entries {

// True when `error` is live, filling what is asked for (any pointer may be null).
using Fields = bool (*)(const CalrtError* error, CalrtCode* code, const char** message,
                        size_t* message_size);

inline constexpr char kUnknownError[] = "not a live CalrtError (destroyed or never issued)";
inline constexpr char kTooSmall[] = "Calrt_Error_Message_Args: struct_size too small";

inline void destroy(Calrt_Error_Destroy_Args* args, void (*release)(CalrtError*)) {
  if (args == nullptr || args->struct_size < CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE) return;
  release(args->error);
}

inline void message(Calrt_Error_Message_Args* args, Fields fields) {
  if (args == nullptr || args->struct_size < CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE) {
    if (args != nullptr &&
        args->struct_size >= offsetof(Calrt_Error_Message_Args, message) + sizeof(args->message)) {
      args->message = kTooSmall;  // the field fits: say why there is no message
    }
    return;
  }
  if (!fields(args->error, nullptr, &args->message, &args->message_size)) {
    args->message = kUnknownError;
    args->message_size = sizeof(kUnknownError) - 1;
  }
}

inline void get_code(Calrt_Error_GetCode_Args* args, Fields fields) {
  if (args == nullptr || args->struct_size < CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE) return;
  if (!fields(args->error, &args->code, nullptr, nullptr)) args->code = CALRT_INVALID_HANDLE;
}

}  // namespace simdev::error_entries
