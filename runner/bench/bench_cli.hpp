// The command line of `calrt bench` (command_line.hpp): its options, their help and their
// checks.
#pragma once

#include <memory>

#include "runner/core/command_line.hpp"

namespace runner {

std::unique_ptr<Command> add_bench_command(CLI::App& calrt);

}  // namespace runner
