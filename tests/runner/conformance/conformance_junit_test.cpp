// The JUnit document of a run with every verdict: failures and skips as elements carrying
// the reason (escaped by tinyxml2, so any reason text survives), counts per suite and in
// total, one suite per group in the order the groups ran.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <tinyxml2.h>

#include "runner/conformance/conformance_command.hpp"

namespace {

using runner::ClauseResult;

TEST(ConformanceJunit, VerdictsBecomeElementsWithTheirReasons) {
  const std::vector<ClauseResult> results = {
      {"VER.1", "table", ClauseResult::Verdict::pass, "", 0.25},
      {"VER.2", "major", ClauseResult::Verdict::skip, "no entry point", 0.5},
      {"KV.3", "exhaustion", ClauseResult::Verdict::fail, "got <OK> & \"success\"", 1.0},
  };
  const std::string xml =
      runner::junit_xml("calrt conformance", runner::conformance_junit_suites(results));
  tinyxml2::XMLDocument doc;
  ASSERT_EQ(doc.Parse(xml.c_str()), tinyxml2::XML_SUCCESS) << xml;
  const auto* root = doc.FirstChildElement("testsuites");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->IntAttribute("tests"), 3);
  EXPECT_EQ(root->IntAttribute("failures"), 1);
  EXPECT_EQ(root->IntAttribute("skipped"), 1);
  EXPECT_DOUBLE_EQ(root->DoubleAttribute("time"), 1.75);
  const auto* ver = root->FirstChildElement("testsuite");
  ASSERT_NE(ver, nullptr);
  EXPECT_STREQ(ver->Attribute("name"), "VER");
  EXPECT_EQ(ver->IntAttribute("tests"), 2);
  EXPECT_EQ(ver->IntAttribute("skipped"), 1);
  const auto* pass = ver->FirstChildElement("testcase");
  EXPECT_STREQ(pass->Attribute("name"), "VER.1 table");
  EXPECT_STREQ(pass->Attribute("classname"), "conformance.VER");
  EXPECT_EQ(pass->FirstChildElement(), nullptr);
  const auto* skip = pass->NextSiblingElement("testcase");
  ASSERT_NE(skip->FirstChildElement("skipped"), nullptr);
  EXPECT_STREQ(skip->FirstChildElement("skipped")->Attribute("message"), "no entry point");
  const auto* kv = ver->NextSiblingElement("testsuite");
  ASSERT_NE(kv, nullptr);
  EXPECT_STREQ(kv->Attribute("name"), "KV");
  EXPECT_EQ(kv->IntAttribute("failures"), 1);
  const auto* failure = kv->FirstChildElement("testcase")->FirstChildElement("failure");
  ASSERT_NE(failure, nullptr);
  EXPECT_STREQ(failure->Attribute("message"), "got <OK> & \"success\"");
}

// A runtime's message may hold control bytes and invalid UTF-8, which XML 1.0 cannot: the
// report shows them escaped, so that strict parsers (JUnit consumers, xmllint) accept it.
TEST(ConformanceJunit, ControlBytesAndInvalidUtf8AreEscaped) {
  const std::string reason = std::string("bell\x07 nul") + '\0' + " bad\xff utf8 \xc3\xa9 ok";
  const std::vector<ClauseResult> results = {
      {"ERR.3", "messages", ClauseResult::Verdict::fail, reason, 0.1}};
  const std::string xml =
      runner::junit_xml("calrt conformance", runner::conformance_junit_suites(results));
  for (const char c : xml) {
    const auto byte = static_cast<unsigned char>(c);
    EXPECT_FALSE(byte < 0x20 && c != '\n' && c != '\t' && c != '\r')
        << "raw control byte " << int{byte};
    EXPECT_NE(byte, 0xffu) << "raw invalid UTF-8 byte";
  }
  EXPECT_NE(xml.find("bell\\x07 nul\\x00 bad\xEF\xBF\xBD utf8 \xc3\xa9 ok"), std::string::npos)
      << xml;
  tinyxml2::XMLDocument doc;
  EXPECT_EQ(doc.Parse(xml.c_str()), tinyxml2::XML_SUCCESS) << xml;
}

}  // namespace
