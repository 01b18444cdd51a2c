// The command line of `calrt conformance` (command_line.hpp).
#pragma once

#include <memory>

#include "runner/core/command_line.hpp"

namespace runner {

std::unique_ptr<Command> add_conformance_command(CLI::App& calrt);

}  // namespace runner
