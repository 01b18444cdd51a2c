// Entry points: error objects (error_entries.hpp, shared with the service client).
#include "simdev/runtime/entry_guard.hpp"
#include "simdev/runtime/entry_points.hpp"
#include "simdev/runtime/error_entries.hpp"

namespace simdev::runtime {
namespace {

bool fields(const CalrtError* error, CalrtCode* code, const char** message, size_t* size) {
  if (!is_live_error(error)) return false;
  if (code != nullptr) *code = error->code;
  if (message != nullptr) *message = error->message.c_str();
  if (size != nullptr) *size = error->message.size();
  return true;
}

void release(CalrtError* error) { destroy_error(error); }

}  // namespace

void error_destroy(Calrt_Error_Destroy_Args* args) { error_entries::destroy(args, release); }
void error_message(Calrt_Error_Message_Args* args) { error_entries::message(args, fields); }
void error_get_code(Calrt_Error_GetCode_Args* args) { error_entries::get_code(args, fields); }

}  // namespace simdev::runtime
