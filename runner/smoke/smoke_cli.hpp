// The command line of `calrt smoke` (command_line.hpp).
#pragma once

#include <memory>

#include "runner/core/command_line.hpp"

namespace runner {

std::unique_ptr<Command> add_smoke_command(CLI::App& calrt);

}  // namespace runner
