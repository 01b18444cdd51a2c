// --md FILE: a report as GitHub-flavoured markdown, for pasting into a review: a line with
// the verdict and counts, one with the command line and tool version (the envelope's
// fields), then the command's tables.
#pragma once

#include <string>
#include <vector>

#include "runner/core/report/envelope.hpp"

namespace runner {

struct MarkdownTable {
  std::string title;  // a "### " heading above the table; none when empty
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// The document; cells are escaped (a `|` or a line break cannot break the table).
std::string markdown_report(const Envelope& envelope, const std::vector<MarkdownTable>& tables);

}  // namespace runner
