// Exit codes of every calrt subcommand: cli/exit_codes.hpp, shared with `simdev`.
#pragma once

#include "cli/exit_codes.hpp"

namespace runner {

using calrt::cli::kExitFail;
using calrt::cli::kExitPass;
using calrt::cli::kExitUsage;

}  // namespace runner
