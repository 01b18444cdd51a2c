// Every command's JSON report opens with the same envelope (runner/core/report/envelope.hpp): one
// reader can tell what produced a report, how to run it again, its verdict and what it
// counted, whichever command wrote it. Each command is run for real, on the tiny calbin, and
// its report read back; a failing and a bad-input run show the verdict moves with the facts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/runner/calrt_process.hpp"
#include "tests/runner/scratch_dir_test.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Case {
  const char* name;     // the report's schema is calrt-<name>/N
  const char* command;  // the subcommand the envelope names
  std::string args;     // after the subcommand, before --json
  int exit_code;
  const char* result;
  const char* unit;
};

class ReportEnvelope : public ScratchDirTest {
 protected:
  // Runs `calrt <command> <args> --json R` and returns R, after the envelope's checks.
  json run_and_read(const Case& c) {
    const fs::path report = dir_ / (std::string(c.name) + ".json");
    const std::string args = std::string(c.command) + " " + c.args + " --json " + quoted(report);
    const CalrtRun run = run_calrt(args);
    EXPECT_EQ(run.exit_code, c.exit_code) << c.name << ": " << run.output;
    std::ifstream stream(report);
    if (!stream) {
      ADD_FAILURE() << c.name << ": no report written; " << run.output;
      return json::object();
    }
    const json doc = json::parse(stream);
    const std::string schema = doc.value("schema", "");
    EXPECT_EQ(schema.rfind(std::string("calrt-") + c.name + "/", 0), 0u) << schema;
    EXPECT_EQ(doc.at("tool").at("name"), "calrt");
    EXPECT_FALSE(doc.at("tool").at("version").get<std::string>().empty());
    EXPECT_TRUE(doc.at("tool").at("commit").is_string());
    EXPECT_EQ(doc.at("command"), c.command);
    // The command line is the one that ran, shell-quoted: it names the executable, the
    // subcommand and the report path given.
    const std::string line = doc.at("command_line").get<std::string>();
    EXPECT_NE(line.find(CALRT_EXE), std::string::npos) << line;
    EXPECT_NE(line.find(std::string(" ") + c.command + " "), std::string::npos) << line;
    EXPECT_NE(line.find(report.string()), std::string::npos) << line;
    EXPECT_EQ(doc.at("result"), c.result) << c.name;
    const json& counts = doc.at("counts");
    EXPECT_EQ(counts.at("unit"), c.unit) << c.name;
    for (const char* key : {"total", "passed", "failed", "skipped"}) {
      EXPECT_TRUE(counts.at(key).is_number_unsigned()) << c.name << " counts." << key;
    }
    EXPECT_EQ(counts.at("total").get<uint64_t>(), counts.at("passed").get<uint64_t>() +
                                                      counts.at("failed").get<uint64_t>() +
                                                      counts.at("skipped").get<uint64_t>());
    // The verdict and the counts agree: a PASS has nothing failed, a FAIL something.
    if (doc.at("result") == "PASS") {
      EXPECT_EQ(counts.at("failed"), 0) << c.name;
      EXPECT_GT(counts.at("total"), 0) << c.name;
      EXPECT_FALSE(doc.contains("error")) << c.name;
    }
    if (doc.at("result") == "FAIL") {
      EXPECT_GT(counts.at("failed"), 0) << c.name;
    }
    if (doc.at("result") == "ERROR") {
      EXPECT_FALSE(doc.value("error", "").empty()) << c.name;
    }
    return doc;
  }
};

const std::string kCalbin = quoted(CALRT_TEST_CALBIN);
const std::string kCalbinDir = quoted(fs::path(CALRT_TEST_CALBIN).parent_path());

TEST_F(ReportEnvelope, EveryCommandOpensWithTheSameEnvelope) {
  const fs::path recording = dir_ / "info.jsonl";
  const std::vector<Case> cases = {
      {"smoke", "smoke", kCalbin, 0, "PASS", "step"},
      {"devices", "devices", "", 0, "PASS", "device"},
      {"info", "info", "--record " + quoted(recording), 0, "PASS", "device"},
      {"reset", "reset", "--level cores", 0, "PASS", "device"},
      {"check", "check", kCalbin, 0, "PASS", "check"},
      {"inspect", "inspect", kCalbin, 0, "PASS", "model"},
      {"plan", "plan", kCalbin, 0, "PASS", "chip"},
      {"bench", "bench", kCalbin + " --runs 1 --warmup 0 --gen-len 2 --prompt-len 8", 0, "PASS",
       "mode"},
      {"bench-sweep", "bench",
       kCalbin + " --runs 1 --warmup 0 --gen-len 2 --prompt-len 8,16 --mode sync", 0, "PASS",
       "point"},
      {"scenario", "scenario",
       quoted(fs::path(CALRT_SOURCE_DIR) / "scenarios/baseline-kv-allocate-clear-free-pass.yaml") +
           " --calbin-dir " + kCalbinDir,
       0, "PASS", "run"},
      {"conformance", "conformance", "--only VER --calbin " + kCalbin, 0, "PASS", "clause"},
      {"replay", "replay", quoted(recording), 0, "PASS", "call"},
  };
  for (const Case& c : cases) {
    run_and_read(c);
  }
}

// The verdict follows the facts: a defect gives FAIL with the failures counted, bad input
// ERROR with the message.
TEST_F(ReportEnvelope, FailuresAndBadInputAreCounted) {
  const fs::path calbin = dir_ / "calbin";
  fs::copy(CALRT_TEST_CALBIN, calbin, fs::copy_options::recursive);
  {
    std::ofstream truncate(calbin / "param_blk0.bin", std::ios::trunc);  // a damaged payload
  }
  const json check = run_and_read({"check", "check", quoted(calbin), 1, "FAIL", "check"});
  EXPECT_FALSE(check.value("failed_ids", json::array()).empty());
  run_and_read({"smoke", "smoke", quoted(dir_ / "missing"), 2, "ERROR", "step"});
  run_and_read({"bench", "bench", kCalbin + " --prompt-len 4600 --gen-len 32", 2, "ERROR", "mode"});
  // A smoke whose runner corrupts what it reads back fails its steps.
  const json smoke =
      run_and_read({"smoke", "smoke", kCalbin + " --inject-runner-bug past-kv", 1, "FAIL", "step"});
  EXPECT_GT(smoke["counts"]["failed"].get<uint64_t>(), 0u);
}

// The CSV rows carry the same provenance as the JSON: schema, version, commit, command line.
TEST_F(ReportEnvelope, CsvRowsCarryTheirProvenance) {
  const fs::path csv = dir_ / "bench.csv";
  const CalrtRun run = run_calrt(
      "bench " + kCalbin + " --runs 1 --warmup 0 --gen-len 2 --prompt-len 8 --csv " + quoted(csv));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::ifstream stream(csv);
  std::string header;
  std::getline(stream, header);
  EXPECT_EQ(header.rfind("schema,tool_version,commit,command_line,mode,metric,", 0), 0u) << header;
  std::string row;
  size_t rows = 0;
  while (std::getline(stream, row)) {
    ++rows;
    EXPECT_EQ(row.rfind("calrt-bench/3,", 0), 0u) << row;
    EXPECT_NE(row.find(csv.string()), std::string::npos) << row;
  }
  EXPECT_GT(rows, 0u);
}

}  // namespace
