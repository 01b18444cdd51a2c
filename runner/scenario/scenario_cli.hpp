// The command line of `calrt scenario` (command_line.hpp).
#pragma once

#include <memory>

#include "runner/core/command_line.hpp"

namespace runner {

std::unique_ptr<Command> add_scenario_command(CLI::App& calrt);

}  // namespace runner
