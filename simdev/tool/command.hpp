// command.hpp: the `simdev` subcommands (cli/command.hpp), one file each; main.cpp only
// registers them, as calrt's does.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>

#include "cli/command.hpp"
#include "cli/exit_codes.hpp"

namespace simdev::tool {

using calrt::cli::Command;
using calrt::cli::kExitFail;
using calrt::cli::kExitPass;
using calrt::cli::kExitUsage;

std::unique_ptr<Command> add_gen_command(CLI::App& simdev);      // gen_command.cpp
std::unique_ptr<Command> add_presets_command(CLI::App& simdev);  // presets_command.cpp
std::unique_ptr<Command> add_serve_command(CLI::App& simdev);    // serve_command.cpp

}  // namespace simdev::tool
