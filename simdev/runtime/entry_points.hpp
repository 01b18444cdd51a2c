// The simulator's implementations of every calrt.h entry, grouped by area in entry_*.cpp;
// api_table.cpp puts them in the function table.
#pragma once

#include "abi/runtime_table.hpp"

namespace simdev::runtime {

CALRT_DECLARE_RUNTIME_ENTRIES()
// CALRT_EXT_PROBE, which only the simulator offers (after DIAG in its chain).
CalrtError* probe_read(Calrt_Probe_Read_Args* args);

}  // namespace simdev::runtime
