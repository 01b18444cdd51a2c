// `calrt reset --level L`: Device_Reset at that level, then the device's status as `calrt info`
// shows it (a shared device of `simdev serve` needs the control role for the reset).
#pragma once

#include "abi/calrt.hpp"
#include "runner/tools/info.hpp"

namespace runner {

struct ResetOptions {
  InfoOptions device;  // which device, the timeout (also the reset's) and --json
  calrt::ResetLevel level = calrt::ResetLevel::job_abort;
};

// Returns the process exit code (exit_codes.hpp). Never throws.
int run_reset(const ResetOptions& options);

// "job-abort", "cores", "chip", "full": the names `calrt reset --level` takes.
const char* reset_level_name(calrt::ResetLevel level);

}  // namespace runner
