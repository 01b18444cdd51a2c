#include "runner/core/report/envelope.hpp"

#include "version/version.hpp"

namespace runner {
namespace {

std::vector<std::string>& recorded_command_line() {
  static std::vector<std::string> argv;
  return argv;
}

}  // namespace

const char* to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::pass:
      return "PASS";
    case Verdict::fail:
      return "FAIL";
    case Verdict::error:
      return "ERROR";
  }
  return "ERROR";
}

Verdict verdict_from(std::string_view text) {
  if (text == "PASS") return Verdict::pass;
  if (text == "FAIL") return Verdict::fail;
  return Verdict::error;
}

nlohmann::json to_json(const Envelope& e) {
  nlohmann::json doc = {{"schema", e.schema},
                        {"tool",
                         {{"name", "calrt"},
                          {"version", calrt_version::project()},
                          {"commit", calrt_version::commit()}}},
                        {"command", e.command},
                        {"command_line", shell_command_line(command_line())},
                        {"result", to_string(e.result)},
                        {"counts",
                         {{"unit", e.counts.unit},
                          {"total", e.counts.total()},
                          {"passed", e.counts.passed},
                          {"failed", e.counts.failed},
                          {"skipped", e.counts.skipped}}}};
  if (!e.error.empty()) {
    doc["error"] = e.error;
  }
  return doc;
}

void set_command_line(int argc, const char* const* argv) {
  recorded_command_line().assign(argv, argv + argc);
}

const std::vector<std::string>& command_line() { return recorded_command_line(); }

std::string shell_command_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& arg : argv) {
    if (!line.empty()) {
      line += ' ';
    }
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789_-+=./:,@%") == std::string::npos;
    if (plain) {
      line += arg;
      continue;
    }
    line += '\'';
    for (const char c : arg) {
      line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    line += '\'';
  }
  return line;
}

std::string csv_quote(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) {
    return std::string(text);
  }
  std::string out = "\"";
  for (const char c : text) {
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  }
  return out + "\"";
}

std::string csv_provenance_header() { return "schema,tool_version,commit,command_line"; }

std::string csv_provenance(std::string_view schema) {
  return csv_quote(schema) + "," + csv_quote(calrt_version::project()) + "," +
         csv_quote(calrt_version::commit()) + "," + csv_quote(shell_command_line(command_line()));
}

}  // namespace runner
