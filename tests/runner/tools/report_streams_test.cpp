// --jsonl and --md (runner/core/report/jsonl.hpp, markdown.hpp), run for real on the tiny calbin:
// one record per result, as it finishes, and a last line that is the report's envelope;
// a markdown table a row per result. The counts are checked against the --json report of the
// same run, and the per-run bench figures against the request's own arithmetic. Bad paths
// exit 2 before any work, naming the flag and the path.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/runner/calrt_process.hpp"
#include "tests/runner/scratch_dir_test.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kTiny = quoted(CALRT_TEST_CALBIN);
const std::string kTinyDir = quoted(fs::path(CALRT_TEST_CALBIN).parent_path());
const std::string kScenario =
    quoted(fs::path(CALRT_SOURCE_DIR) / "scenarios/chip-hang-prefill-needs-cores-reset.yaml");

std::vector<json> read_lines(const std::string& text) {
  std::vector<json> lines;
  std::istringstream stream(text);
  std::string line;
  while (std::getline(stream, line)) {
    lines.push_back(json::parse(line));  // throws (fails the test) on a line that is not JSON
  }
  return lines;
}

std::string read_file(const fs::path& path) {
  std::ifstream stream(path);
  return {std::istreambuf_iterator<char>(stream), {}};
}

class ReportStreams : public ScratchDirTest {
 protected:
  // Runs `calrt ARGS --jsonl J --json R --md M`; checks the stream against the report and
  // returns the records before the summary. `counted`: one record per unit the envelope
  // counts (not so for bench, which counts modes and streams runs).
  std::vector<json> run_streamed(const std::string& args, int exit_code,
                                 const std::string& record_kind, bool counted = true) {
    const fs::path jsonl = dir_ / "out.jsonl", report = dir_ / "out.json", md = dir_ / "out.md";
    const CalrtRun run = run_calrt(args + " --jsonl " + quoted(jsonl) + " --json " +
                                   quoted(report) + " --md " + quoted(md));
    EXPECT_EQ(run.exit_code, exit_code) << args << "\n" << run.output;
    std::vector<json> lines = read_lines(read_file(jsonl));
    if (lines.empty()) {
      ADD_FAILURE() << args << ": no records";
      return {};
    }
    const json summary = lines.back();
    lines.pop_back();
    const json doc = json::parse(read_file(report));
    EXPECT_EQ(summary.at("record"), "summary");
    for (const char* key : {"schema", "tool", "command", "command_line", "result", "counts"}) {
      EXPECT_EQ(summary.at(key), doc.at(key)) << args << ": " << key;
    }
    if (counted) {
      EXPECT_EQ(lines.size(), doc.at("counts").at("total").get<size_t>()) << args;
    }
    size_t failed = 0;
    for (const json& record : lines) {
      EXPECT_EQ(record.at("record"), record_kind) << record.dump();
      const std::string verdict = record.value("verdict", record.value("result", ""));
      failed += verdict == "FAIL";
    }
    // The markdown opens with the verdict and counts of the same report.
    const std::string text = read_file(md);
    const size_t failed_counted = counted ? failed : doc.at("counts").at("failed").get<size_t>();
    const std::string head = "**calrt " + doc.at("command").get<std::string>() + ": " +
                             doc.at("result").get<std::string>() + "** (" +
                             std::to_string(doc.at("counts").at("passed").get<size_t>()) +
                             " passed, " + std::to_string(failed_counted) + " failed";
    EXPECT_EQ(text.rfind(head, 0), 0u) << text.substr(0, 200) << "\nexpected: " << head;
    EXPECT_NE(text.find("| --- |"), std::string::npos) << text;
    return lines;
  }
};

TEST_F(ReportStreams, ConformanceStreamsOneRecordPerClause) {
  const std::vector<json> clauses =
      run_streamed("conformance --only VER,KV.1 --calbin " + kTiny, 0, "clause");
  ASSERT_FALSE(clauses.empty());
  for (const json& c : clauses) {
    EXPECT_EQ(c.at("verdict"), "PASS") << c.dump();
    EXPECT_TRUE(c.at("id").get<std::string>().rfind("VER.", 0) == 0 ||
                c.at("id").get<std::string>().rfind("KV.1", 0) == 0)
        << c.dump();
  }
  EXPECT_NE(read_file(dir_ / "out.md").find("| VER.1 |"), std::string::npos);
}

TEST_F(ReportStreams, CampaignStreamsOneRecordPerPlan) {
  const std::vector<json> plans =
      run_streamed("scenario --campaign 3 --seed 5 --calbin-dir " + kTinyDir, 0, "plan");
  ASSERT_EQ(plans.size(), 3u);
  for (size_t i = 0; i < plans.size(); ++i) {
    EXPECT_EQ(plans[i].at("seed"), 5 + i);
  }
  EXPECT_NE(read_file(dir_ / "out.md").find("Failed plans: 0 of 3"), std::string::npos);
}

// A recovery policy with a defect fails the scenario that guards against it; the stream
// and the table say so, with the command that replays it.
TEST_F(ReportStreams, AFailingScenarioIsStreamedAndTabledAsAFailure) {
  const std::vector<json> runs =
      run_streamed("scenario " + kScenario + " --policy-bug single-level --calbin-dir " + kTinyDir,
                   1, "scenario");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].at("result"), "FAIL") << runs[0].dump();
  const std::string md = read_file(dir_ / "out.md");
  EXPECT_NE(md.find("| FAIL |"), std::string::npos) << md;
  EXPECT_NE(md.find("--policy-bug single-level"), std::string::npos) << md;
}

TEST_F(ReportStreams, BenchStreamsOneRecordPerMeasuredRun) {
  const uint32_t gen = 4, concurrency = 2;
  const std::vector<json> runs =
      run_streamed("bench " + kTiny + " --runs 2 --warmup 1 --prompt-len 8 --gen-len 4 " +
                       "--concurrency 2 --host-time model",
                   0, "run", /*counted=*/false);
  // The envelope counts modes; the records are runs: 2 measured runs in each of 2 modes, the
  // warm-up left out.
  ASSERT_EQ(runs.size(), 4u);
  for (const json& run : runs) {
    EXPECT_EQ(run.at("tokens"), gen * concurrency) << run.dump();
    ASSERT_EQ(run.at("requests").size(), concurrency);
    for (const json& r : run.at("requests")) {
      EXPECT_EQ(r.at("tokens"), gen);
      const double ttft = r.at("ttft_ms"), tpot = r.at("tpot_ms"), e2e = r.at("e2e_ms");
      EXPECT_GT(ttft, 0.0);
      EXPECT_NEAR(e2e, ttft + tpot * (gen - 1), 1e-6) << r.dump();
      EXPECT_LE(e2e, run.at("device_ms").get<double>() + 1e-9);
    }
  }
}

TEST_F(ReportStreams, SweepStreamsOneRecordPerPoint) {
  const std::vector<json> points = run_streamed(
      "bench " + kTiny + " --runs 1 --warmup 0 --gen-len 2 --prompt-len 8,16", 0, "point");
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].at("config").at("prompt_len"), "8");
  EXPECT_EQ(points[1].at("config").at("prompt_len"), "16");
}

// With `-` the records own stdout: every line there is JSON, and the human lines go to
// stderr instead.
TEST_F(ReportStreams, DashGivesStdoutToTheRecordsAlone) {
  const fs::path err = dir_ / "stderr.txt";
  const CalrtRun run =
      run_command("( '" + std::string(CALRT_EXE) + "' conformance --only VER --jsonl - --calbin " +
                  kTiny + " 2>" + quoted(err) + " )");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::vector<json> lines = read_lines(run.output);
  ASSERT_GT(lines.size(), 1u);
  EXPECT_EQ(lines.back().at("record"), "summary");
  EXPECT_NE(read_file(err).find("PASS VER.1"), std::string::npos);
}

// Conformance and a campaign draw their progress lines on a terminal (script(1) gives them
// one and copies what they drew), and nothing of it when piped or given --quiet.
TEST_F(ReportStreams, ProgressLinesOnlyOnATerminal) {
  const std::string exe = std::string("'") + CALRT_EXE + "' ";
  const std::string conformance = exe + "conformance --only VER --calbin " + kTiny;
  const std::string campaign = exe + "scenario --campaign 3 --calbin-dir " + kTinyDir;
  const CalrtRun tty = run_command("script -qec " + shell_quoted(conformance) + " /dev/null");
  ASSERT_EQ(tty.exit_code, 0) << tty.output;
  EXPECT_NE(tty.output.find("\rclauses 1/"), std::string::npos) << tty.output;
  const CalrtRun plans = run_command("script -qec " + shell_quoted(campaign) + " /dev/null");
  ASSERT_EQ(plans.exit_code, 0) << plans.output;
  EXPECT_NE(plans.output.find("\rplans 0/3 (plan 1)"), std::string::npos) << plans.output;
  for (const std::string& command : {conformance, campaign}) {
    const CalrtRun piped = run_command(command);
    EXPECT_EQ(piped.output.find('\r'), std::string::npos) << piped.output;
    const CalrtRun quiet =
        run_command("script -qec " + shell_quoted(command + " --quiet") + " /dev/null");
    EXPECT_EQ(quiet.output.find("\x1b[K"), std::string::npos) << quiet.output;
  }
}

TEST_F(ReportStreams, BadPathsExitTwoBeforeAnyWork) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const fs::path missing = dir_ / "no" / "such" / "x";
  struct Bad {
    std::string args;
    std::string needle;
  };
  const std::vector<Bad> cases = {
      {"conformance --only VER --calbin " + kTiny + " --jsonl " + quoted(missing),
       "--jsonl '" + missing.string() + "'"},
      {"conformance --only VER --calbin " + kTiny + " --md " + quoted(missing),
       "--md '" + missing.string() + "'"},
      {"scenario --campaign 1 --calbin-dir " + kTinyDir + " --jsonl " + quoted(dir_),
       "--jsonl '" + dir_.string()},
      {"bench " + kTiny + " --runs 1 --jsonl " + quoted(fifo), "a FIFO with no reader"},
      {"bench " + kTiny + " --runs 1 --md " + quoted(dir_ / "r") + " --json " + quoted(dir_ / "r"),
       "name the same file"},
      {"bench " + kTiny + " --runs 1 --sweep pcie_lanes=4,8 --jsonl " + quoted(missing),
       "--jsonl '" + missing.string() + "'"},
  };
  for (const Bad& bad : cases) {
    const CalrtRun run = run_calrt(bad.args);
    EXPECT_EQ(run.exit_code, 2) << bad.args << "\n" << run.output;
    EXPECT_NE(run.output.find(bad.needle), std::string::npos) << bad.args << "\n" << run.output;
    EXPECT_FALSE(fs::exists(missing.parent_path())) << bad.args;
  }
}

}  // namespace
