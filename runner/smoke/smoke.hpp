// `calrt smoke`: stage 9, the standalone device smoke against golden outputs.
#pragma once

#include "runner/core/session_options.hpp"

namespace runner {

// Runs the smoke; returns the process exit code (exit_codes.hpp). Never throws.
int run_smoke(const SmokeOptions& options);

}  // namespace runner
