#include "runner/core/report/markdown.hpp"

#include "version/version.hpp"

namespace runner {
namespace {

std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += "<br>";
    } else {
      out += c;
    }
  }
  return out;
}

std::string row(const std::vector<std::string>& cells, size_t width) {
  std::string out = "|";
  for (size_t i = 0; i < width; ++i) {
    out += " " + (i < cells.size() ? cell(cells[i]) : std::string()) + " |";
  }
  return out + "\n";
}

}  // namespace

std::string markdown_report(const Envelope& e, const std::vector<MarkdownTable>& tables) {
  std::string out = "**calrt " + e.command + ": " + to_string(e.result) + "** (" +
                    std::to_string(e.counts.passed) + " passed, " +
                    std::to_string(e.counts.failed) + " failed, " +
                    std::to_string(e.counts.skipped) + " skipped " + e.counts.unit + "s)\n\n";
  if (!e.error.empty()) {
    out += "Error: " + cell(e.error) + "\n\n";
  }
  const std::string line = shell_command_line(command_line());
  if (!line.empty()) {
    // A fence longer than any backtick run inside keeps the line verbatim.
    std::string fence = "`";
    while (line.find(fence) != std::string::npos) fence += '`';
    out += fence + " " + line + " " + fence + "\n\n";
  }
  out += "calrt " + std::string(calrt_version::project()) + " (commit " + calrt_version::commit() +
         "), " + e.schema + "\n";
  for (const MarkdownTable& table : tables) {
    out += "\n";
    if (!table.title.empty()) {
      out += "### " + cell(table.title) + "\n\n";
    }
    const size_t width = table.header.size();
    out += row(table.header, width);
    out += "|";
    for (size_t i = 0; i < width; ++i) out += " --- |";
    out += "\n";
    for (const std::vector<std::string>& r : table.rows) out += row(r, width);
  }
  return out;
}

}  // namespace runner
