// `calrt generate`: declares its options (generate.hpp runs it).
#pragma once

#include <memory>

#include "runner/core/command_line.hpp"

namespace runner {

std::unique_ptr<Command> add_generate_command(CLI::App& calrt);

}  // namespace runner
