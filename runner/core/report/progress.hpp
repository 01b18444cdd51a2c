// A progress line for long work on a terminal: "cases 3/16 (len255)  2.1/s  ETA 6 s", redrawn
// in place on stderr at most every 100 ms and erased when done, so that the lines the command
// prints afterwards are untouched. Shown only when stdout and stderr are both terminals and
// the command was not given --quiet: a log file or a CI job gets nothing extra.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace runner {

class Progress {
 public:
  // Whether progress may be drawn at all: stdout and stderr are terminals.
  static bool terminal();

  Progress(std::string what, uint64_t total, bool enabled, std::FILE* out = stderr);
  ~Progress() { clear(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `done` of total finished; `item` names what runs now (optional).
  void update(uint64_t done, std::string_view item = {});
  // Erases the line (before the command prints its own lines).
  void clear();

  // The text of the line after `elapsed_s` seconds (no control characters): what, done/total,
  // the item, the rate and the time left at that rate.
  std::string line(uint64_t done, double elapsed_s, std::string_view item) const;

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_;
  uint64_t total_;
  bool enabled_;
  std::FILE* out_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
  bool drawn_ = false;
};

}  // namespace runner
