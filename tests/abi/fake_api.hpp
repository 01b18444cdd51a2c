// An in-process fake CalRT runtime for the wrapper tests: a table of functions that record
// what they were called with and answer as the test configures them.
#pragma once

#include <cstdint>
#include <string>

#include "abi/calrt.h"

namespace fake {

struct State {
  int errors_created = 0;
  int errors_destroyed = 0;
  int devices_created = 0;
  int devices_destroyed = 0;
  int unmaps = 0;
  int kv_capacity_calls = 0;
  uint64_t last_wait_timeout_ns = 0;
  int device_state_override = 0;  // when non-zero, Device_Status returns it
  bool job_hung = false;          // Job_Wait answers NOT_READY
  bool job_fails = false;         // the job ends FAILED with DMA_ERROR
  int live_kv = 0;
};

// Resets the state and returns a full table (struct_size = this header's).
CalrtApi make_table();
State& state();

}  // namespace fake
