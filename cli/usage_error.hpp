// Usage errors as a newcomer needs them: which subcommand refused what, and the option or
// form that was probably meant (CLI11 alone prints "The following arguments were not
// expected: all --case", with no subcommand and no suggestion).
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli/exit_codes.hpp"
#include "cli/nearest.hpp"

namespace calrt::cli {

// Prints CLI11's parse error for `tool` (help and --version print as usual) and returns the
// exit code: 0 for those two, kExitUsage for every mistake.
inline int usage_error(CLI::App& app, const CLI::ParseError& error, std::string_view tool, int argc,
                       char** argv) {
  if (error.get_exit_code() == 0) return app.exit(error) == 0 ? kExitPass : kExitUsage;
  CLI::App* command = &app;
  std::string where(tool);
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;
    try {
      command = app.get_subcommand(argv[i]);
      where += " " + std::string(argv[i]);
    } catch (const CLI::OptionNotFound&) {
    }
    break;
  }
  std::vector<std::string> names;
  for (const CLI::Option* option : command->get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  std::string hint;
  for (int i = 1; i < argc && hint.empty(); ++i) {
    const std::string_view word = argv[i];
    if (word.size() < 3 || word.substr(0, 2) != "--") continue;
    const std::string name(word.substr(0, word.find('=')));
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    if (const std::string near = nearest(name, names); !near.empty()) {
      hint = " (did you mean " + near + "?)";
    }
  }
  std::fprintf(stderr, "%s: %s%s; see %s --help\n", where.c_str(), error.what(), hint.c_str(),
               where.c_str());
  return kExitUsage;
}

}  // namespace calrt::cli
