// The scenario library (scenarios/*.yaml) as a whole: it is big enough and well formed, it
// runs deterministically, it reaches every fault kind of simdev/device/FAULTS.md and every
// site, and its negative controls catch the policy bugs they name. That each file passes on
// its own is one ctest per file (CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "tests/runner/scenario/scenario_library.hpp"
#include "tests/runner/scratch_dir_test.hpp"

namespace fs = std::filesystem;
using namespace scenario_test;

namespace {

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(read_text(path)); }

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    out += (out.empty() ? "" : ", ") + item;
  }
  return out;
}

// The documented lists must parse, or every check built on them would pass vacuously.
TEST(ScenarioDocs, FaultKindsAndPolicyBugsParse) {
  const std::vector<std::string> kinds = documented_fault_kinds();
  EXPECT_GE(kinds.size(), 13u) << joined(kinds);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "dma_h2d"), kinds.end()) << joined(kinds);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "slow_completion"), kinds.end()) << joined(kinds);
  const std::vector<std::string> bugs = documented_policy_bugs();
  EXPECT_GE(bugs.size(), 9u) << joined(bugs);
  EXPECT_NE(std::find(bugs.begin(), bugs.end(), "no-reset"), bugs.end()) << joined(bugs);
}

TEST(ScenarioLibrary, IsLargeAndEachFileIsComplete) {
  const std::vector<fs::path> files = library_files();
  EXPECT_GE(files.size(), 32u);
  EXPECT_GE(sweep_files().size(), 1u) << "no sweep file (a `sweep:` section) in scenarios/";
  static const std::regex kebab("^[a-z0-9]+(-[a-z0-9]+)+$");
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    EXPECT_TRUE(std::regex_match(file.stem().string(), kebab)) << "not a kebab-case name";
    const YAML::Node doc = YAML::LoadFile(file.string());
    for (const char* key : {"description", "calbin", "seed", "faults", "steps", "expect"}) {
      EXPECT_TRUE(doc[key].IsDefined()) << "no " << key;
    }
    EXPECT_EQ(doc["calbin"].as<std::string>(""), "tiny");
    EXPECT_GE(doc["description"].as<std::string>("").size(), 40u) << "say what happens";
  }
}

// Every kind of FAULTS.md appears in the plan of at least one scenario that lists negative
// controls: for every kind some scenario proves that a wrong policy would be caught.
TEST(ScenarioLibrary, EveryDocumentedKindHasANegativeControlScenario) {
  std::set<std::string> controlled;
  std::set<std::string> planned;
  for (const fs::path& file : library_files()) {
    const YAML::Node doc = YAML::LoadFile(file.string());
    const std::set<std::string> kinds = planned_kinds(doc);
    planned.insert(kinds.begin(), kinds.end());
    if (!negative_controls(doc).empty()) {
      controlled.insert(kinds.begin(), kinds.end());
    }
  }
  for (const std::string& kind : documented_fault_kinds()) {
    EXPECT_TRUE(planned.count(kind)) << "no scenario plans fault kind " << kind;
    EXPECT_TRUE(controlled.count(kind))
        << "no scenario with negative_controls plans fault kind " << kind;
  }
}

// Every policy bug of scenarios/README.md is some scenario's negative control, and no scenario
// names a bug the README does not document.
TEST(ScenarioLibrary, EveryDocumentedPolicyBugIsANegativeControl) {
  const std::vector<std::string> documented = documented_policy_bugs();
  std::set<std::string> used;
  for (const fs::path& file : library_files()) {
    for (const std::string& bug : negative_controls(YAML::LoadFile(file.string()))) {
      EXPECT_NE(std::find(documented.begin(), documented.end(), bug), documented.end())
          << file << " lists undocumented policy bug " << bug;
      used.insert(bug);
    }
  }
  for (const std::string& bug : documented) {
    EXPECT_TRUE(used.count(bug)) << "no scenario lists negative control " << bug;
  }
}

using ScenarioLibraryRun = ScratchDirTest;

// The library twice: the same exit code, byte-identical stdout and JSON report, and every
// scenario ending in the same device state hash.
TEST_F(ScenarioLibraryRun, IsDeterministic) {
  const std::string files = joined_paths(library_files());
  const fs::path json1 = dir_ / "first.json";
  const fs::path json2 = dir_ / "second.json";
  const CalrtOutput first =
      run_calrt_split("scenario" + files + calbin_dir_option() + " --json " + quoted(json1), dir_);
  const CalrtOutput second =
      run_calrt_split("scenario" + files + calbin_dir_option() + " --json " + quoted(json2), dir_);
  ASSERT_NE(first.exit_code, -1) << first.out << first.err;
  ASSERT_NE(first.exit_code, 2) << first.out << first.err;
  EXPECT_EQ(first.exit_code, second.exit_code);
  EXPECT_EQ(first.out, second.out);
  // Byte for byte but for the command line, which names each run's own report path.
  nlohmann::json a = read_json(json1);
  nlohmann::json b = read_json(json2);
  EXPECT_NE(a["command_line"], b["command_line"]);
  a.erase("command_line");
  b.erase("command_line");
  EXPECT_EQ(a.dump(2), b.dump(2)) << "the JSON reports differ";
  EXPECT_EQ(a.value("schema", ""), "calrt-scenario/1");
  ASSERT_EQ(a["scenarios"].size(), library_files().size());
  ASSERT_EQ(b["scenarios"].size(), a["scenarios"].size());
  for (size_t i = 0; i < a["scenarios"].size(); ++i) {
    const nlohmann::json& one = a["scenarios"][i];
    const nlohmann::json& two = b["scenarios"][i];
    SCOPED_TRACE(one.value("name", "?"));
    EXPECT_EQ(one["name"], two["name"]);
    ASSERT_TRUE(one["state_hash"].is_string()) << "no state hash: " << one.dump();
    EXPECT_EQ(one["state_hash"], two["state_hash"]);
  }
}

// The library through the simulator's shared library (the loader path a vendor runtime
// takes) ends exactly as in process: same results, same device state hashes. The fault and
// diag extensions cross the library boundary like the rest of the ABI.
TEST_F(ScenarioLibraryRun, SharedLibraryEndsAsInProcess) {
  const std::string files = joined_paths(library_files());
  const fs::path in_process = dir_ / "in-process.json";
  const fs::path library = dir_ / "library.json";
  const CalrtOutput a = run_calrt_split(
      "scenario" + files + calbin_dir_option() + " --json " + quoted(in_process), dir_);
  const CalrtOutput b = run_calrt_split("scenario" + files + calbin_dir_option() + " --device " +
                                            quoted(CALRT_SIM_SO) + " --json " + quoted(library),
                                        dir_);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  const nlohmann::json first = read_json(in_process);
  const nlohmann::json second = read_json(library);
  ASSERT_EQ(first["scenarios"].size(), second["scenarios"].size());
  for (size_t i = 0; i < first["scenarios"].size(); ++i) {
    const nlohmann::json& one = first["scenarios"][i];
    const nlohmann::json& two = second["scenarios"][i];
    SCOPED_TRACE(one.value("name", "?"));
    EXPECT_EQ(one["result"], two["result"]);
    EXPECT_EQ(one["actual"], two["actual"]);
    EXPECT_EQ(one["state_hash"], two["state_hash"]);
  }
}

// From the library's JSON report: every kind FAULTS.md documents was injected at least once,
// and every site a scenario can drive (configure, prefill, decode, kv) was hit.
TEST_F(ScenarioLibraryRun, CoversEveryDocumentedKindAndSite) {
  const fs::path json = dir_ / "report.json";
  const CalrtOutput run =
      run_calrt_split("scenario" + joined_paths(library_files()) + calbin_dir_option() +
                          " --coverage --json " + quoted(json),
                      dir_);
  ASSERT_TRUE(run.exit_code == 0 || run.exit_code == 1) << run.out << run.err;
  const nlohmann::json report = read_json(json);
  ASSERT_TRUE(report["coverage"].is_array()) << report.dump();
  std::map<std::string, uint64_t> by_kind;
  std::map<std::string, uint64_t> by_site;
  for (const nlohmann::json& row : report["coverage"]) {
    const uint64_t count = row.at("count").get<uint64_t>();
    by_kind[row.at("kind").get<std::string>()] += count;
    by_site[row.at("site").get<std::string>()] += count;
  }
  for (const std::string& kind : documented_fault_kinds()) {
    EXPECT_TRUE(by_kind.count(kind)) << "the runtime does not list documented kind " << kind;
    EXPECT_GT(by_kind[kind], 0u) << "no scenario injected fault kind " << kind;
  }
  for (const char* site : {"configure", "prefill", "decode", "kv"}) {
    EXPECT_GT(by_site[site], 0u) << "no scenario injected a fault at site " << site;
  }
  // Stronger: every kind at every one of those sites where the runtime says it can happen
  // (kv_update is left out: the tiny calbin has no kv_update model).
  for (const nlohmann::json& row : report["coverage"]) {
    const std::string site = row.at("site").get<std::string>();
    if (site == "configure" || site == "prefill" || site == "decode" || site == "kv") {
      EXPECT_GT(row.at("count").get<uint64_t>(), 0u)
          << "no scenario injected " << row.at("kind").get<std::string>() << " at " << site;
    }
  }
  EXPECT_NE(run.out.find("coverage:"), std::string::npos) << run.out;
}

// One (scenario, policy bug) pair of the library's negative controls.
struct NegativeControl {
  fs::path file;
  std::string bug;
};

// Names the pair in test output, instead of the struct's bytes.
void PrintTo(const NegativeControl& control, std::ostream* os) {
  *os << control.file.filename().string() << " --policy-bug " << control.bug;
}

std::vector<NegativeControl> all_negative_controls() {
  std::vector<NegativeControl> out;
  for (const fs::path& file : library_files()) {
    try {
      for (const std::string& bug : negative_controls(YAML::LoadFile(file.string()))) {
        out.push_back({file, bug});
      }
    } catch (const YAML::Exception&) {
      // A malformed file fails its own ctest and IsLargeAndEachFileIsComplete.
    }
  }
  return out;
}

std::string test_name(const ::testing::TestParamInfo<NegativeControl>& info) {
  std::string name = info.param.file.stem().string() + "__" + info.param.bug;
  for (char& c : name) {
    c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  }
  return name;
}

class ScenarioNegativeControl : public ScratchDirTest,
                                public ::testing::WithParamInterface<NegativeControl> {};

// With the policy bug the scenario names, its expectations must fail: exit 1 and a FAIL line
// for it (and the JSON says so).
TEST_P(ScenarioNegativeControl, IsCaught) {
  const NegativeControl& control = GetParam();
  const fs::path json = dir_ / "report.json";
  const CalrtOutput run =
      run_calrt_split("scenario " + quoted(control.file) + calbin_dir_option() + " --policy-bug " +
                          control.bug + " --json " + quoted(json),
                      dir_);
  ASSERT_EQ(run.exit_code, 1) << "policy bug " << control.bug << " was not caught by "
                              << control.file << "\n"
                              << run.out << run.err;
  EXPECT_NE(run.out.find("FAIL " + control.file.stem().string()), std::string::npos) << run.out;
  const nlohmann::json report = read_json(json);
  ASSERT_EQ(report["scenarios"].size(), 1u) << report.dump();
  EXPECT_EQ(report["scenarios"][0]["result"], "FAIL");
  EXPECT_EQ(report["scenarios"][0]["policy_bug"], control.bug);
  const nlohmann::json& buggy = report["scenarios"][0]["mismatches"];
  EXPECT_FALSE(buggy.empty());

  // The bug itself must be what fails it: some mismatch of the buggy run is not one the run
  // without the bug has (a scenario that fails anyway would make the control vacuous).
  const fs::path clean_json = dir_ / "clean.json";
  const CalrtOutput clean = run_calrt_split(
      "scenario " + quoted(control.file) + calbin_dir_option() + " --json " + quoted(clean_json),
      dir_);
  ASSERT_TRUE(clean.exit_code == 0 || clean.exit_code == 1) << clean.out << clean.err;
  const nlohmann::json clean_mismatches = read_json(clean_json)["scenarios"][0]["mismatches"];
  const bool caught_by_the_bug =
      std::any_of(buggy.begin(), buggy.end(), [&](const nlohmann::json& mismatch) {
        return std::find(clean_mismatches.begin(), clean_mismatches.end(), mismatch) ==
               clean_mismatches.end();
      });
  EXPECT_TRUE(caught_by_the_bug) << "with " << control.bug << " the run fails only as it does "
                                 << "without it: " << buggy.dump();
}

// The JUnit report of a caught negative control: one testcase, failed, whose message carries
// the mismatch and the command that replays the run.
TEST_F(ScenarioLibraryRun, JunitNamesTheFailureAndItsReplay) {
  const fs::path file = fs::path(CALRT_SCENARIO_DIR) / "chip-hang-prefill-needs-cores-reset.yaml";
  const fs::path junit = dir_ / "report.xml";
  const CalrtOutput run = run_calrt_split("scenario " + quoted(file) + calbin_dir_option() +
                                              " --policy-bug single-level --junit " + quoted(junit),
                                          dir_);
  ASSERT_EQ(run.exit_code, 1) << run.out << run.err;
  const std::string xml = read_text(junit);
  EXPECT_NE(xml.find(R"(<testsuite name="scenarios" tests="1" failures="1")"), std::string::npos)
      << xml;
  EXPECT_NE(xml.find(R"(name="chip-hang-prefill-needs-cores-reset")"), std::string::npos) << xml;
  EXPECT_NE(xml.find("replay: calrt scenario"), std::string::npos) << xml;
  // And a clean run of the same file: the same testcase, passed.
  const CalrtOutput clean = run_calrt_split(
      "scenario " + quoted(file) + calbin_dir_option() + " --junit " + quoted(junit), dir_);
  ASSERT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  EXPECT_NE(read_text(junit).find(R"(tests="1" failures="0")"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Library, ScenarioNegativeControl,
                         ::testing::ValuesIn(all_negative_controls()), test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ScenarioNegativeControl);

}  // namespace
