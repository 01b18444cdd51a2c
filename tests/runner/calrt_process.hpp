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

// Any shell command, stdout and stderr together.
inline CalrtRun run_command(const std::string& shell_command) {
  const std::string command = shell_command + " 2>&1";
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

inline CalrtRun run_calrt(const std::string& args) {
  return run_command(std::string("'") + CALRT_EXE + "' " + args);
}

// `text` as one shell word.
inline std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return out + "'";
}

inline std::string quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }
