// Entries: error objects (simdev/runtime/error_entries.hpp, shared with the simulator).
#include "simdev/runtime/error_entries.hpp"
#include "simdev/service/client/entries/entry_points.hpp"
#include "simdev/service/client/objects/client_errors.hpp"

namespace simdev::service::client {
namespace {

void release(CalrtError* error) { destroy_error(error); }

}  // namespace

void error_destroy(Calrt_Error_Destroy_Args* args) { error_entries::destroy(args, release); }
void error_message(Calrt_Error_Message_Args* args) { error_entries::message(args, error_fields); }
void error_get_code(Calrt_Error_GetCode_Args* args) { error_entries::get_code(args, error_fields); }

}  // namespace simdev::service::client
