// Entry points: error objects. These never fail; a too-small struct or an unknown error is
// answered with a neutral value instead.
#include "simdev/runtime/entry_guard.hpp"
#include "simdev/runtime/entry_points.hpp"

namespace simdev::runtime {
namespace {

constexpr char kUnknownError[] = "not a live CalrtError (destroyed or never issued)";
constexpr char kTooSmall[] = "Calrt_Error_Message_Args: struct_size too small";

}  // namespace

void error_destroy(Calrt_Error_Destroy_Args* args) {
  if (args == nullptr || args->struct_size < CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE) {
    return;
  }
  destroy_error(args->error);
}

void error_message(Calrt_Error_Message_Args* args) {
  if (args == nullptr || args->struct_size < CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE) {
    if (args != nullptr &&
        args->struct_size >= offsetof(Calrt_Error_Message_Args, message) + sizeof(args->message)) {
      args->message = kTooSmall;  // the field fits: say why there is no message
    }
    return;
  }
  if (!is_live_error(args->error)) {
    args->message = kUnknownError;
    args->message_size = sizeof(kUnknownError) - 1;
    return;
  }
  args->message = args->error->message.c_str();
  args->message_size = args->error->message.size();
}

void error_get_code(Calrt_Error_GetCode_Args* args) {
  if (args == nullptr || args->struct_size < CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE) {
    return;
  }
  args->code = is_live_error(args->error) ? args->error->code : CALRT_INVALID_HANDLE;
}

}  // namespace simdev::runtime
