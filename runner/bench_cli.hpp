// The command line of `calrt bench` (CLI11): its options, their help and their checks.
// Part of the `calrt` executable, not of the runner library, like main.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "runner/bench_options.hpp"

namespace runner {

// Choices given as words; finish_bench_options() turns them into the enums.
struct BenchCliWords {
  std::string modes = "both";
  std::string sampling = "greedy";
  std::string host_time = "wall";
};

// Registers everything but the --device* options (main.cpp shares those between commands).
void add_bench_options(CLI::App& app, BenchOptions& options, BenchCliWords& words);
// After parsing: the word choices into `options`, and argv as given, for the reports.
void finish_bench_options(BenchOptions& options, const BenchCliWords& words, int argc, char** argv);

}  // namespace runner
