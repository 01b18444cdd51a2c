// `calrt conformance` as a user runs it: one line per clause and a summary, a JUnit file
// that parses and agrees with the terminal, a JSON report, and bad input that exits 2.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <tinyxml2.h>
#include "tests/sanitized.hpp"

#include <nlohmann/json.hpp>

#include "tests/runner/calrt_process.hpp"

namespace {

namespace fs = std::filesystem;

fs::path scratch_dir() {
  return fs::temp_directory_path() / ("calrt-conformance-cli-" + std::to_string(::getpid()));
}

fs::path scratch(const std::string& name) {
  fs::create_directories(scratch_dir());
  return scratch_dir() / name;
}

// The reports the tests write go when the tests end.
class RemoveScratch : public testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(scratch_dir(), ignored);
  }
};
[[maybe_unused]] testing::Environment* const remove_scratch =
    testing::AddGlobalTestEnvironment(new RemoveScratch);

// id -> "PASS"/"FAIL"/"SKIP" from the terminal lines, and the summary line.
struct Terminal {
  std::map<std::string, std::string> verdicts;
  std::map<std::string, std::string> titles;
  std::string summary;
};

Terminal parse_terminal(const std::string& output) {
  Terminal t;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    for (const char* verdict : {"PASS ", "FAIL ", "SKIP "}) {
      if (line.rfind(verdict, 0) == 0) {
        const std::string rest = line.substr(5);
        const std::string id = rest.substr(0, rest.find(' '));
        // Titles hold no ": " (the registry test checks it), so it starts a FAIL/SKIP reason.
        std::string title = rest.substr(id.size() + 1);
        title = title.substr(0, title.find(": "));
        t.verdicts[id] = std::string(verdict, 4);
        t.titles[id] = title;
      }
    }
    if (line.find(" passed, ") != std::string::npos) {
      t.summary = line;
    }
  }
  return t;
}

std::string conformance_args(const std::string& device) {
  return "conformance --device " + ::quoted(fs::path(device)) + " --calbin " +
         ::quoted(fs::path(CALRT_TEST_CALBIN));
}

TEST(ConformanceCli, JunitAndJsonAgreeWithTheTerminal) {
  const fs::path junit = scratch("suite.xml");
  const fs::path json = scratch("suite.json");
  const CalrtRun run = run_calrt(conformance_args(CALRT_SIM_SO) + " --junit " + quoted(junit) +
                                 " --json " + quoted(json));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Terminal terminal = parse_terminal(run.output);
  ASSERT_GE(terminal.verdicts.size(), 40u) << run.output;
  EXPECT_EQ(terminal.summary,
            std::to_string(terminal.verdicts.size()) + " passed, 0 failed, 0 skipped");

  tinyxml2::XMLDocument doc;
  ASSERT_EQ(doc.LoadFile(junit.c_str()), tinyxml2::XML_SUCCESS) << junit;
  const tinyxml2::XMLElement* root = doc.FirstChildElement("testsuites");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->UnsignedAttribute("tests"), terminal.verdicts.size());
  size_t cases = 0;
  for (const auto* suite = root->FirstChildElement("testsuite"); suite != nullptr;
       suite = suite->NextSiblingElement("testsuite")) {
    const std::string group = suite->Attribute("name");
    size_t in_suite = 0;
    for (const auto* testcase = suite->FirstChildElement("testcase"); testcase != nullptr;
         testcase = testcase->NextSiblingElement("testcase")) {
      ++cases;
      ++in_suite;
      const std::string name = testcase->Attribute("name");
      const std::string id = name.substr(0, name.find(' '));
      EXPECT_EQ(id.substr(0, id.find('.')), group) << name;
      ASSERT_TRUE(terminal.verdicts.count(id)) << name;
      EXPECT_EQ(name, id + " " + terminal.titles.at(id));
      const std::string verdict = testcase->FirstChildElement("failure")   ? "FAIL"
                                  : testcase->FirstChildElement("skipped") ? "SKIP"
                                                                           : "PASS";
      EXPECT_EQ(verdict, terminal.verdicts.at(id)) << id;
      EXPECT_NE(testcase->Attribute("time"), nullptr) << id;
    }
    EXPECT_EQ(suite->UnsignedAttribute("tests"), in_suite) << group;
  }
  EXPECT_EQ(cases, terminal.verdicts.size());

  std::ifstream in(json);
  const nlohmann::json report = nlohmann::json::parse(in);
  EXPECT_EQ(report["clauses"].size(), terminal.verdicts.size());
  for (const auto& clause : report["clauses"]) {
    EXPECT_EQ(clause["verdict"], terminal.verdicts.at(clause["id"].get<std::string>()));
  }
}

TEST(ConformanceCli, OnlyWritesTheSelectedGroups) {
  const fs::path junit = scratch("only.xml");
  const CalrtRun run =
      run_calrt(conformance_args(CALRT_SIM_SO) + " --only VER.1,KV --junit " + quoted(junit));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("9 passed, 0 failed, 0 skipped"), std::string::npos) << run.output;
  tinyxml2::XMLDocument doc;
  ASSERT_EQ(doc.LoadFile(junit.c_str()), tinyxml2::XML_SUCCESS);
  const auto* first = doc.FirstChildElement("testsuites")->FirstChildElement("testsuite");
  ASSERT_NE(first, nullptr);
  EXPECT_STREQ(first->Attribute("name"), "VER");
  const auto* second = first->NextSiblingElement("testsuite");
  ASSERT_NE(second, nullptr);
  EXPECT_STREQ(second->Attribute("name"), "KV");
  EXPECT_EQ(second->NextSiblingElement("testsuite"), nullptr);
}

// The vendor-shim skeleton cannot open a simulated device: the first clause fails saying so,
// and every clause whose fixture fails the same way is SKIP naming that clause, not one more
// copy of the same failure. The clauses that need no device still run and pass.
TEST(ConformanceCli, AFailedFixtureFailsOnceAndSkipsTheClausesBehindIt) {
  const CalrtRun run = run_calrt(conformance_args(CALRT_SHIM_SKELETON_SO));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("FAIL VER.1 table of the current major: Device_Create: "),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("SKIP HDL.2 never-issued handles: not checked: its fixture failed "
                            "as in VER.1 (Device_Create)"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("PASS VER.2 wrong major is refused"), std::string::npos) << run.output;
  EXPECT_TRUE(std::regex_search(run.output, std::regex(R"(\d+ passed, 1 failed, \d+ skipped)")))
      << run.output;
}

TEST(ConformanceCli, MissingCalbinIsBadInput) {
  const CalrtRun run = run_calrt("conformance --device " + ::quoted(fs::path(CALRT_SIM_SO)) +
                                 " --calbin /nonexistent/calbin");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("/nonexistent/calbin"), std::string::npos) << run.output;
}

// The clauses read full logits rows: a calbin that ranks on the device is refused before any
// clause runs, not failed against the runtime.
TEST(ConformanceCli, ARankedDecodeCalbinIsBadInput) {
  const CalrtRun run = run_calrt("conformance --device " + ::quoted(fs::path(CALRT_SIM_SO)) +
                                 " --calbin " + ::quoted(fs::path(CALRT_TEST_RANKED_CALBIN)));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("ranks on the device (output \"top_ids\" has role top_ids)"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("PASS"), std::string::npos) << "ran clauses before refusing";
}

TEST(ConformanceCli, UnknownOnlyPrefixIsBadInput) {
  const CalrtRun run = run_calrt(conformance_args(CALRT_SIM_SO) + " --only KV,BOGUS");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("BOGUS"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("PASS"), std::string::npos) << "ran clauses before refusing";
}

TEST(ConformanceCli, UnwritableJunitIsBadInput) {
  for (const std::string& target :
       {std::string("/nonexistent-dir/suite.xml"), scratch("a-directory").string()}) {
    fs::create_directories(scratch("a-directory"));
    const CalrtRun run =
        run_calrt(conformance_args(CALRT_SIM_SO) + " --junit " + ::quoted(fs::path(target)));
    EXPECT_EQ(run.exit_code, 2) << target << "\n" << run.output;
    EXPECT_NE(run.output.find(target), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("PASS"), std::string::npos) << "ran clauses before refusing";
  }
}

// Under AddressSanitizer LeakSanitizer may turn the runtime's exit(0) into status 23: there
// only the common words are checked.
using calrt_test::kSanitized;

// A runtime that calls exit(0) fails the clauses that reach it; the command still prints its
// summary, writes both reports and exits 1.
TEST(ConformanceCli, ARuntimeThatExitsFailsAndTheReportsAreWritten) {
  const fs::path junit = scratch("exiting.xml");
  const fs::path json = scratch("exiting.json");
  const CalrtRun run = run_calrt(conformance_args(CALRT_EXITING_SO) + " --only VER,JOB.1,HDL" +
                                 " --junit " + quoted(junit) + " --json " + quoted(json));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  const Terminal terminal = parse_terminal(run.output);
  ASSERT_TRUE(terminal.verdicts.count("JOB.1")) << run.output;
  EXPECT_EQ(terminal.verdicts.at("JOB.1"), "FAIL");
  EXPECT_NE(run.output.find(kSanitized ? "before the clause returned"
                                       : "exited with status 0 before the clause returned"),
            std::string::npos)
      << run.output;
  EXPECT_NE(terminal.summary.find(" failed"), std::string::npos) << run.output;
  tinyxml2::XMLDocument doc;
  EXPECT_EQ(doc.LoadFile(junit.c_str()), tinyxml2::XML_SUCCESS) << junit;
  std::ifstream in(json);
  const nlohmann::json report = nlohmann::json::parse(in);
  EXPECT_EQ(report["clauses"].size(), terminal.verdicts.size());
}

// The copies of the calbin that CAL.2 corrupts live in one private directory of the suite,
// which the suite removes even when the runtime ends a clause's process (here, on the bad
// calbin it is handed) before the clause could clean up.
TEST(ConformanceCli, NoFilesAreLeftWhenAClauseProcessDies) {
  const fs::path tmp = scratch("tmpdir");
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const CalrtRun run = run_command("TMPDIR=" + quoted(tmp) + " '" + CALRT_EXE + "' " +
                                   conformance_args(CALRT_EXITING_SO) + " --only CAL");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  const Terminal terminal = parse_terminal(run.output);
  ASSERT_TRUE(terminal.verdicts.count("CAL.2")) << run.output;
  EXPECT_EQ(terminal.verdicts.at("CAL.2"), "FAIL") << run.output;
  std::vector<std::string> left;
  for (const auto& entry : fs::recursive_directory_iterator(tmp)) {
    left.push_back(entry.path().string());
  }
  EXPECT_TRUE(left.empty()) << "left behind: " << left.front();
}

TEST(ConformanceCli, AnUnusableTemporaryDirectoryIsBadInput) {
  const fs::path missing = scratch("no-such-tmpdir");
  fs::remove_all(missing);
  const CalrtRun run = run_command("TMPDIR=" + quoted(missing) + " '" + CALRT_EXE + "' " +
                                   conformance_args(CALRT_SIM_SO) + " --only VER.1");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("TMPDIR=" + missing.string()), std::string::npos) << run.output;
}

TEST(ConformanceCli, BadTimeoutsAreBadInput) {
  for (const char* flag : {"--clause-timeout 0", "--clause-timeout nan", "--timeout -1"}) {
    const CalrtRun run = run_calrt(conformance_args(CALRT_SIM_SO) + " " + flag);
    EXPECT_EQ(run.exit_code, 2) << flag << "\n" << run.output;
    EXPECT_NE(run.output.find(std::string(flag).substr(0, std::string(flag).find(' '))),
              std::string::npos)
        << run.output;
  }
}

// A runtime the loader refuses (its table is of another major) is a conformance failure:
// VER.1 fails with the loader's words, the other clauses are skipped, the JUnit file is
// written and the exit is 1; a library that is not there stays bad input (below).
TEST(ConformanceCli, AWrongMajorRuntimeFailsVerOneWithAReport) {
  const fs::path junit = scratch("wrong-major.xml");
  const CalrtRun run = run_calrt(conformance_args(CALRT_WRONG_MAJOR_SO) + " --only VER,JOB.1" +
                                 " --junit " + quoted(junit));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  const Terminal terminal = parse_terminal(run.output);
  ASSERT_TRUE(terminal.verdicts.count("VER.1")) << run.output;
  EXPECT_EQ(terminal.verdicts.at("VER.1"), "FAIL");
  EXPECT_EQ(terminal.verdicts.at("JOB.1"), "SKIP");
  EXPECT_NE(run.output.find("refused at load"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("asked for ABI major 0, the table says 1."), std::string::npos)
      << run.output;
  tinyxml2::XMLDocument doc;
  ASSERT_EQ(doc.LoadFile(junit.c_str()), tinyxml2::XML_SUCCESS) << junit;
  const tinyxml2::XMLElement* suites = doc.FirstChildElement("testsuites");
  ASSERT_NE(suites, nullptr);
  EXPECT_STREQ(suites->Attribute("failures"), "1");
}

TEST(ConformanceCli, UnloadableDeviceIsBadInput) {
  const CalrtRun run = run_calrt(conformance_args("/nonexistent/libruntime.so"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("/nonexistent/libruntime.so"), std::string::npos) << run.output;
}

}  // namespace
