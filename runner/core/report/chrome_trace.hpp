// A writer of Chrome trace event JSON, the format chrome://tracing and Perfetto
// (ui.perfetto.dev) load: {"displayTimeUnit":"ns","traceEvents":[...]}.
//
// Only what timelines need: process and thread names (metadata events "M"), their sort
// order, and complete events ("ph":"X") with a start and a duration. Times are taken in
// integer nanoseconds and printed in microseconds, the format's unit, as an exact decimal
// with three fractional digits ("12.345"), never through floating point, so the same
// events always give byte-identical text. Events appear in the order they were added.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace runner {

// Nanoseconds as microseconds with exactly three decimals: 12345 -> "12.345", -5 -> "-0.005".
std::string format_us(int64_t ns);
// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);

class ChromeTrace {
 public:
  // One entry of an event's "args": a key and its value, already JSON-encoded.
  struct Arg {
    std::string key;
    std::string json;
  };
  static Arg arg(std::string key, int64_t value);
  static Arg arg(std::string key, uint64_t value);
  static Arg arg(std::string key, std::string_view value);
  static Arg arg(std::string key, const char* value) {
    return arg(std::move(key), std::string_view(value));
  }
  static Arg arg(std::string key, bool value);

  // Names a process (pid) and places it at `sort_index` among processes.
  void process(int pid, std::string_view name, int sort_index);
  // Names a thread (track) of a process and places it at `sort_index` within it.
  void thread(int pid, int tid, std::string_view name, int sort_index);
  // A span on track (pid, tid) from begin_ns lasting duration_ns.
  void complete(int pid, int tid, std::string_view name, std::string_view category,
                int64_t begin_ns, int64_t duration_ns, const std::vector<Arg>& args = {});

  size_t complete_events() const { return complete_events_; }
  // The whole document, one event per line.
  std::string to_json() const;

 private:
  std::vector<std::string> events_;  // each one JSON object
  size_t complete_events_ = 0;
};

}  // namespace runner
