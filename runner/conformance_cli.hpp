// The command line of `calrt conformance` (CLI11). Part of the `calrt` executable, not of
// the runner library, like main.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include "runner/conformance_command.hpp"

namespace runner {

// Registers everything but the --device* options (main.cpp shares those between commands).
void add_conformance_options(CLI::App& app, ConformanceCommandOptions& options);

}  // namespace runner
