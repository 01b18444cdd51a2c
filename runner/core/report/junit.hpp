// JUnit XML reports for suites that CI systems ingest: one <testsuite> per group, one
// <testcase> per check, written through tinyxml2 so that escaping is never hand-made.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace runner {

struct JunitCase {
  enum class Outcome { pass, fail, skip };
  std::string classname;  // e.g. "conformance.KV"
  std::string name;       // e.g. "KV.3 exhaustion is an error"
  Outcome outcome = Outcome::pass;
  std::string message;  // <failure message=...> or <skipped message=...>; empty for a pass
  double seconds = 0.0;
};

struct JunitSuite {
  std::string name;
  std::vector<JunitCase> cases;
};

// The document: <testsuites name=...> with per-suite and total tests/failures/skipped/time.
// Text as XML 1.0 can hold it: control bytes as \xNN, invalid UTF-8 as U+FFFD.
std::string xml_safe(std::string_view text);

std::string junit_xml(const std::string& name, const std::vector<JunitSuite>& suites);

// Writes the document atomically (report.hpp); empty on success, else why, naming the file.
std::string write_junit_file(const std::filesystem::path& path, const std::string& name,
                             const std::vector<JunitSuite>& suites);

}  // namespace runner
