// command.hpp: one `simdev` subcommand. Each subcommand's file creates its CLI11 subcommand,
// declares its options and returns a Command; main.cpp only registers them, as calrt's does
// (runner/core/command_line.hpp).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>

namespace simdev::tool {

// Exit codes, as calrt's: 0 done, 1 the work failed, 2 usage or bad input.
inline constexpr int kExitDone = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitUsage = 2;

class Command {
 public:
  explicit Command(CLI::App* app) : app_(app) {}
  virtual ~Command() = default;
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  bool parsed() const { return app_->parsed(); }
  // After parsing: finishes what CLI11 cannot check, then runs. Returns the exit code.
  virtual int run(int argc, char** argv) = 0;

 protected:
  CLI::App* app_;
};

std::unique_ptr<Command> add_gen_command(CLI::App& simdev);      // gen_command.cpp
std::unique_ptr<Command> add_presets_command(CLI::App& simdev);  // presets_command.cpp
std::unique_ptr<Command> add_serve_command(CLI::App& simdev);    // serve_command.cpp

}  // namespace simdev::tool
