// Entries: error objects. These never fail; a too-small struct or an unknown error is
// answered with a neutral value instead, as the simulator does.
#include "simdev/service/client/entries/entry_points.hpp"
#include "simdev/service/client/objects/client_errors.hpp"

namespace simdev::service::client {
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
  if (!error_fields(args->error, nullptr, &args->message, &args->message_size)) {
    args->message = kUnknownError;
    args->message_size = sizeof(kUnknownError) - 1;
  }
}

void error_get_code(Calrt_Error_GetCode_Args* args) {
  if (args == nullptr || args->struct_size < CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE) {
    return;
  }
  if (!error_fields(args->error, &args->code, nullptr, nullptr)) {
    args->code = CALRT_INVALID_HANDLE;
  }
}

}  // namespace simdev::service::client
