// One subcommand of a command-line tool (`calrt`, `simdev`). Each subcommand's file creates
// its CLI11 subcommand, declares its options on it (as HailoRT's CLI and XRT's xbutil2 do,
// one command per class) and returns a Command; the tool's main.cpp only registers them.
#pragma once

#include <CLI/CLI.hpp>

namespace calrt::cli {

class Command {
 public:
  explicit Command(CLI::App* app) : app_(app) {}
  virtual ~Command() = default;
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  bool parsed() const { return app_->parsed(); }
  // After parsing: finishes what CLI11 cannot check, then runs. Returns the process exit
  // code (exit_codes.hpp).
  virtual int run(int argc, char** argv) = 0;

 protected:
  CLI::App* app_;
};

}  // namespace calrt::cli
