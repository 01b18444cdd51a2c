// `calrt calibrate`'s command line (calibrate.hpp).
#pragma once

#include <memory>

#include "runner/core/command_line.hpp"

namespace runner {

std::unique_ptr<Command> add_calibrate_command(CLI::App& calrt);

}  // namespace runner
