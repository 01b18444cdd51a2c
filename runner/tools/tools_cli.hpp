// The command lines of the single-file commands (command_line.hpp): check, inspect and plan
// read a calbin without a device; info reads a device's status; replay re-issues a call
// recording.
#pragma once

#include <memory>

#include "runner/core/command_line.hpp"

namespace runner {

std::unique_ptr<Command> add_devices_command(CLI::App& calrt);
std::unique_ptr<Command> add_info_command(CLI::App& calrt);
std::unique_ptr<Command> add_reset_command(CLI::App& calrt);
std::unique_ptr<Command> add_check_command(CLI::App& calrt);
std::unique_ptr<Command> add_inspect_command(CLI::App& calrt);
std::unique_ptr<Command> add_plan_command(CLI::App& calrt);
std::unique_ptr<Command> add_replay_command(CLI::App& calrt);
std::unique_ptr<Command> add_merge_command(CLI::App& calrt);

}  // namespace runner
