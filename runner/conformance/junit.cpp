#include "runner/conformance/junit.hpp"

#include <fmt/format.h>
#include <tinyxml2.h>

#include "runner/core/report.hpp"

namespace runner {
namespace {

struct JunitTotals {
  size_t tests = 0, failures = 0, skipped = 0;
  double seconds = 0.0;

  void add(const JunitCase& c) {
    ++tests;
    failures += c.outcome == JunitCase::Outcome::fail ? 1 : 0;
    skipped += c.outcome == JunitCase::Outcome::skip ? 1 : 0;
    seconds += c.seconds;
  }
  void add(const JunitTotals& other) {
    tests += other.tests;
    failures += other.failures;
    skipped += other.skipped;
    seconds += other.seconds;
  }
  void set(tinyxml2::XMLElement* element) const {
    element->SetAttribute("tests", static_cast<int64_t>(tests));
    element->SetAttribute("failures", static_cast<int64_t>(failures));
    element->SetAttribute("errors", 0);
    element->SetAttribute("skipped", static_cast<int64_t>(skipped));
    element->SetAttribute("time", fmt::format("{:.6f}", seconds).c_str());
  }
};

}  // namespace

std::string junit_xml(const std::string& name, const std::vector<JunitSuite>& suites) {
  tinyxml2::XMLDocument doc;
  doc.InsertEndChild(doc.NewDeclaration());
  tinyxml2::XMLElement* root = doc.NewElement("testsuites");
  root->SetAttribute("name", name.c_str());
  doc.InsertEndChild(root);
  JunitTotals all;
  for (const JunitSuite& suite : suites) {
    tinyxml2::XMLElement* element = doc.NewElement("testsuite");
    element->SetAttribute("name", suite.name.c_str());
    root->InsertEndChild(element);
    JunitTotals totals;
    for (const JunitCase& c : suite.cases) {
      totals.add(c);
      tinyxml2::XMLElement* testcase = doc.NewElement("testcase");
      testcase->SetAttribute("classname", c.classname.c_str());
      testcase->SetAttribute("name", c.name.c_str());
      testcase->SetAttribute("time", fmt::format("{:.6f}", c.seconds).c_str());
      if (c.outcome != JunitCase::Outcome::pass) {
        tinyxml2::XMLElement* detail =
            doc.NewElement(c.outcome == JunitCase::Outcome::fail ? "failure" : "skipped");
        detail->SetAttribute("message", c.message.c_str());
        testcase->InsertEndChild(detail);
      }
      element->InsertEndChild(testcase);
    }
    totals.set(element);
    all.add(totals);
  }
  all.set(root);
  tinyxml2::XMLPrinter printer;
  doc.Print(&printer);
  return std::string(printer.CStr(), static_cast<size_t>(printer.CStrSize() - 1));
}

std::string write_junit_file(const std::filesystem::path& path, const std::string& name,
                             const std::vector<JunitSuite>& suites) {
  return write_text_file(path, junit_xml(name, suites));
}

}  // namespace runner
