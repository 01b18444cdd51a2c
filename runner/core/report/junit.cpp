#include "runner/core/report/junit.hpp"

#include <fmt/format.h>
#include <tinyxml2.h>

#include <cstdint>

#include "runner/core/report/report.hpp"

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

std::string xml_safe(std::string_view text) {
  // XML 1.0 allows tab, newline, carriage return and valid UTF-8 from U+0020 on; a runtime's
  // message may hold anything. Control bytes become \xNN, invalid UTF-8 U+FFFD, so that the
  // report always parses and still shows what the runtime said.
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      if (byte < 0x20 && byte != '\t' && byte != '\n' && byte != '\r') {
        out += fmt::format("\\x{:02x}", byte);
      } else if (byte == 0x7f) {
        out += "\\x7f";
      } else {
        out += static_cast<char>(byte);
      }
      ++i;
      continue;
    }
    // The length a lead byte announces, and the smallest code point that length may encode
    // (shorter encodings are overlong and invalid).
    size_t length = 0;
    uint32_t code = 0;
    uint32_t least = 0;
    if ((byte & 0xE0) == 0xC0) {
      length = 2, code = byte & 0x1Fu, least = 0x80;
    } else if ((byte & 0xF0) == 0xE0) {
      length = 3, code = byte & 0x0Fu, least = 0x800;
    } else if ((byte & 0xF8) == 0xF0) {
      length = 4, code = byte & 0x07u, least = 0x10000;
    }
    bool valid = length > 0 && i + length <= text.size();
    for (size_t k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      valid = (next & 0xC0) == 0x80;
      code = (code << 6) | (next & 0x3Fu);
    }
    valid = valid && code >= least && code <= 0x10FFFF && !(code >= 0xD800 && code <= 0xDFFF) &&
            code != 0xFFFE && code != 0xFFFF;
    if (valid) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  return out;
}

std::string junit_xml(const std::string& name, const std::vector<JunitSuite>& suites) {
  tinyxml2::XMLDocument doc;
  doc.InsertEndChild(doc.NewDeclaration());
  tinyxml2::XMLElement* root = doc.NewElement("testsuites");
  root->SetAttribute("name", xml_safe(name).c_str());
  doc.InsertEndChild(root);
  JunitTotals all;
  for (const JunitSuite& suite : suites) {
    tinyxml2::XMLElement* element = doc.NewElement("testsuite");
    element->SetAttribute("name", xml_safe(suite.name).c_str());
    root->InsertEndChild(element);
    JunitTotals totals;
    for (const JunitCase& c : suite.cases) {
      totals.add(c);
      tinyxml2::XMLElement* testcase = doc.NewElement("testcase");
      testcase->SetAttribute("classname", xml_safe(c.classname).c_str());
      testcase->SetAttribute("name", xml_safe(c.name).c_str());
      testcase->SetAttribute("time", fmt::format("{:.6f}", c.seconds).c_str());
      if (c.outcome != JunitCase::Outcome::pass) {
        tinyxml2::XMLElement* detail =
            doc.NewElement(c.outcome == JunitCase::Outcome::fail ? "failure" : "skipped");
        detail->SetAttribute("message", xml_safe(c.message).c_str());
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
