// calrt: the standalone runner for the CalRT runtime. This file only registers the
// subcommands, each declared in its folder's `*_cli.cpp` (core/command_line.hpp), parses the
// command line and runs the one that was chosen.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/usage_error.hpp"
#include "runner/bench/bench_cli.hpp"
#include "runner/calibrate/calibrate_cli.hpp"
#include "runner/conformance/conformance_cli.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/core/report/envelope.hpp"
#include "runner/generate/generate_cli.hpp"
#include "runner/scenario/scenario_cli.hpp"
#include "runner/smoke/smoke_cli.hpp"
#include "runner/tools/tools_cli.hpp"
#include "version/version.hpp"

int main(int argc, char** argv) {
  // Past a file-size limit a write must fail with EFBIG, and the report writer clean up,
  // instead of the process dying half-way through a report.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"calrt: the standalone runner for the CalRT runtime of the Calculet NPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", calrt_version::line("calrt"));
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging on stderr");
  app.fallthrough();

  // In the order `calrt --help` lists them.
  std::vector<std::unique_ptr<runner::Command>> commands;
  for (auto add :
       {runner::add_smoke_command, runner::add_devices_command, runner::add_info_command,
        runner::add_reset_command, runner::add_check_command, runner::add_inspect_command,
        runner::add_plan_command, runner::add_bench_command, runner::add_generate_command,
        runner::add_calibrate_command, runner::add_scenario_command,
        runner::add_conformance_command, runner::add_replay_command, runner::add_merge_command}) {
    commands.push_back(add(app));
  }

  // CLI11 would answer an unknown first word with "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    const auto subcommands = app.get_subcommands([](CLI::App*) { return true; });
    std::string names;
    bool known = false;
    for (const CLI::App* subcommand : subcommands) {
      known = known || subcommand->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + subcommand->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "calrt: unknown command '%s' (commands: %s; see calrt --help)\n",
                   argv[1], names.c_str());
      return runner::kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return calrt::cli::usage_error(app, error, "calrt", argc, argv);
  }
  spdlog::set_default_logger(spdlog::stderr_color_st("calrt"));
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  runner::set_command_line(argc, argv);
  for (const auto& command : commands) {
    if (command->parsed()) return command->run(argc, argv);
  }
  return runner::kExitUsage;  // unreachable: CLI11 requires one subcommand
}
