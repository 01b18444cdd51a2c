// markdown_report: whatever a cell or the command line holds, the table keeps its shape.
#include "runner/core/report/markdown.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace runner {
namespace {

size_t count_of(const std::string& text, char c) {
  size_t n = 0;
  for (size_t at = 0; at < text.size(); ++at) {
    n += text[at] == c && (at == 0 || text[at - 1] != '\\');
  }
  return n;
}

TEST(Markdown, CellsCannotBreakTheTable) {
  const char* argv[] = {"calrt", "scenario", "it's `odd`"};
  set_command_line(3, argv);
  const Envelope envelope{.schema = "calrt-test/1",
                          .command = "scenario",
                          .result = Verdict::fail,
                          .counts = {.unit = "run", .passed = 1, .failed = 2}};
  const std::string md =
      markdown_report(envelope, {{.title = "Runs",
                                  .header = {"name", "why"},
                                  .rows = {{"a|b", "line one\nline two"}, {"short"}}}});
  EXPECT_EQ(md.rfind("**calrt scenario: FAIL** (1 passed, 2 failed, 0 skipped runs)", 0), 0u) << md;
  // The command line sits in a fence longer than the backtick run it holds.
  EXPECT_NE(md.find("`` calrt scenario 'it'\\''s `odd`' ``"), std::string::npos) << md;
  std::istringstream lines(md.substr(md.find("### Runs")));
  std::string line;
  std::getline(lines, line);  // the heading
  std::getline(lines, line);  // blank
  size_t rows = 0;
  while (std::getline(lines, line) && !line.empty()) {
    ++rows;
    EXPECT_EQ(count_of(line, '|'), 3u) << line;  // two cells on every row, a short row padded
  }
  EXPECT_EQ(rows, 4u);  // header, rule, two rows: the line break became <br>
  EXPECT_NE(md.find("a\\|b"), std::string::npos);
  EXPECT_NE(md.find("line one<br>line two"), std::string::npos);
  set_command_line(0, nullptr);
}

}  // namespace
}  // namespace runner
