// The client's implementations of every calrt.h entry, grouped by area in entries_*.cpp;
// api_table.cpp puts them in the function table.
#pragma once

#include "abi/runtime_table.hpp"

namespace simdev::service::client {

CALRT_DECLARE_RUNTIME_ENTRIES()

}  // namespace simdev::service::client
