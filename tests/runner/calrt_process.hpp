// Runs the `calrt` executable as a child process and captures what it prints, so tests see
// exactly what a user sees: output, exit code, and whether it crashed.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

struct CalrtRun {
  int exit_code = -1;  // -1: killed by a signal (a crash)
  std::string output;  // stdout and stderr
};

inline CalrtRun run_calrt(const std::string& args) {
  const std::string command = std::string("'") + CALRT_EXE + "' " + args + " 2>&1";
  CalrtRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return run;
  }
  char chunk[4096];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof(chunk), pipe)) > 0) {
    run.output.append(chunk, got);
  }
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

inline std::string quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }
