// `simdev`: the simulated device's own tool. This file only registers the subcommands, each
// in its own `*_command.cpp` (command.hpp), parses the command line and runs the one that was
// chosen. Exit codes, as calrt's: 0 done, 1 the work failed, 2 usage or bad input. Logs and
// errors go to stderr; stdout carries only what scripts read (the preset list, serve's
// listening lines).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/usage_error.hpp"
#include "simdev/tool/command.hpp"
#include "version/version.hpp"

int main(int argc, char** argv) {
  using namespace simdev::tool;
  CLI::App app{"simdev: the simulated Calculet NPU's tool"};
  app.require_subcommand(1);
  app.set_version_flag("--version", calrt_version::line("simdev"));
  app.footer("Exit codes: 0 done; 1 the work failed; 2 usage or bad input.");

  // In the order `simdev --help` lists them.
  std::vector<std::unique_ptr<Command>> commands;
  for (auto add : {add_gen_command, add_presets_command, add_serve_command}) {
    commands.push_back(add(app));
  }

  // CLI11 would answer an unknown first word with "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    try {
      app.get_subcommand(argv[1]);
    } catch (const CLI::OptionNotFound&) {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        names += (names.empty() ? "" : ", ") + sub->get_name();
      }
      std::fprintf(stderr, "simdev: unknown command '%s' (commands: %s; see simdev --help)\n",
                   argv[1], names.c_str());
      return kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return calrt::cli::usage_error(app, error, "simdev", argc, argv);
  }
  auto logger = spdlog::stderr_color_st("simdev");
  logger->set_pattern("simdev: %^%l%$: %v");
  spdlog::set_default_logger(logger);
  for (const auto& command : commands) {
    if (command->parsed()) return command->run(argc, argv);
  }
  return kExitUsage;  // unreachable: CLI11 requires one subcommand
}
