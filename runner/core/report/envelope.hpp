// The envelope every `calrt` JSON report shares, so that one reader handles them all: which
// schema, which tool built it, how to run it again, the verdict, and what was counted.
//
//   schema        "calrt-<report>/<version>"; the version changes when a field changes meaning
//   tool          {name, version, commit}
//   command       the subcommand ("smoke", "bench", ...)
//   command_line  the invocation, shell-quoted: paste it to reproduce the run
//   result        PASS, FAIL, or ERROR (bad input found before anything ran; see `error`)
//   counts        {unit, total, passed, failed, skipped}: integers, for every command
//   error         present only when there is one
//
// The CSV reports carry the same fields as leading columns (csv_provenance).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace runner {

enum class Verdict { pass, fail, error };
const char* to_string(Verdict verdict);
// "PASS", "FAIL", "ERROR"; anything else is ERROR.
Verdict verdict_from(std::string_view text);

// What a command counted: steps, clauses, checks, points... `unit` is singular.
struct Counts {
  std::string unit;
  uint64_t passed = 0;
  uint64_t failed = 0;
  uint64_t skipped = 0;
  uint64_t total() const { return passed + failed + skipped; }
};

struct Envelope {
  std::string schema;   // e.g. "calrt-smoke/1"
  std::string command;  // e.g. "smoke"
  Verdict result = Verdict::error;
  Counts counts;
  std::string error;
};

// The envelope's fields as a JSON object; the command adds its own next to them.
nlohmann::json to_json(const Envelope& envelope);

// The process's command line, recorded once by main() for every report to carry. Empty when
// the runner library is driven without the executable (tests, the Python binding).
void set_command_line(int argc, const char* const* argv);
const std::vector<std::string>& command_line();

// argv joined into one shell command line, each argument single-quoted unless it consists
// only of characters no shell treats specially.
std::string shell_command_line(const std::vector<std::string>& argv);

// One CSV field, quoted (RFC 4180) when it holds a comma, quote or line break.
std::string csv_quote(std::string_view text);

// The leading CSV columns of every row, and their header: schema, tool_version, commit,
// command_line. A row carries its provenance on its own, so that rows pasted together from
// several reports still say where each came from.
std::string csv_provenance_header();
std::string csv_provenance(std::string_view schema);

}  // namespace runner
