// --shard I/N and `calrt merge`: a run split over machines and joined again gives the very
// stream one unsharded run gives (the simulator is deterministic, so byte for byte). Each
// shard runs in a directory of its own with the same relative report path, as the pods of a
// Kubernetes Indexed Job would. Every way a set of shards can be wrong is refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/runner/calrt_process.hpp"
#include "tests/runner/scratch_dir_test.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string slurp(const fs::path& path) {
  std::ifstream stream(path);
  return {std::istreambuf_iterator<char>(stream), {}};
}

std::vector<json> records_of(const fs::path& path) {
  std::vector<json> out;
  std::istringstream lines(slurp(path));
  std::string line;
  while (std::getline(lines, line)) out.push_back(json::parse(line));
  return out;
}

class ShardMerge : public ScratchDirTest {
 protected:
  // Runs `calrt ARGS --jsonl out.jsonl` in DIR/NAME; returns the stream's path.
  // exit_code -2: any verdict (0 or 1), not bad input or a crash.
  fs::path run_in(const std::string& name, const std::string& args, int exit_code) {
    const fs::path dir = dir_ / name;
    fs::create_directories(dir);
    const CalrtRun run = run_command("cd " + quoted(dir) + " && '" + std::string(CALRT_EXE) + "' " +
                                     args + " --jsonl out.jsonl");
    if (exit_code == -2) {
      EXPECT_TRUE(run.exit_code == 0 || run.exit_code == 1) << args << "\n" << run.output;
    } else {
      EXPECT_EQ(run.exit_code, exit_code) << args << "\n" << run.output;
    }
    return dir / "out.jsonl";
  }

  // The unsharded run against N shards merged (given in reverse order).
  void expect_merge_identical(const std::string& args, uint32_t shards, int exit_code) {
    const fs::path whole = run_in("whole", args, exit_code);
    std::vector<fs::path> parts;
    std::set<uint64_t> indices;
    size_t records = 0;
    for (uint32_t i = 0; i < shards; ++i) {
      const std::string shard = std::to_string(i) + "/" + std::to_string(shards);
      // A shard's own verdict depends on the units it drew; only the merged one is checked.
      parts.push_back(run_in("shard" + std::to_string(i), args + " --shard " + shard, -2));
      for (const json& r : records_of(parts.back())) {
        if (r["record"] == "summary") {
          EXPECT_EQ(r["shard"]["index"], i);
          continue;
        }
        ++records;
        EXPECT_EQ(r["index"].get<uint64_t>() % shards, i) << r.dump();
        indices.insert(r["index"].get<uint64_t>());
      }
    }
    std::reverse(parts.begin(), parts.end());
    std::string list;
    for (const fs::path& p : parts) list += " " + quoted(p);
    const fs::path merged = dir_ / "merged.jsonl";
    const CalrtRun merge = run_calrt("merge" + list + " --out " + quoted(merged));
    EXPECT_EQ(merge.exit_code, exit_code) << merge.output;
    EXPECT_EQ(slurp(merged), slurp(whole));
    EXPECT_EQ(records + 1, records_of(whole).size());
    EXPECT_EQ(*indices.rbegin() + 1, indices.size()) << "units 0..K-1, each once";
  }

  const std::string tiny_dir_ = quoted(fs::path(CALRT_TEST_CALBIN).parent_path());
};

TEST_F(ShardMerge, ACampaignSplitThreeWaysMergesIntoTheWholeRun) {
  expect_merge_identical("scenario --campaign 7 --seed 3 --calbin-dir " + tiny_dir_, 3, 0);
}

TEST_F(ShardMerge, ABenchSweepSplitTwoWaysMergesIntoTheWholeRun) {
  expect_merge_identical("bench " + quoted(CALRT_TEST_CALBIN) +
                             " --runs 1 --gen-len 2 --prompt-len 8,16,24 --host-time model",
                         2, 0);
}

// Scenario files are the units of a file list; a failing one fails the merged run too.
TEST_F(ShardMerge, ScenarioFilesSplitAndAFailureSurvivesTheMerge) {
  const fs::path dir = fs::path(CALRT_SOURCE_DIR) / "scenarios";
  std::string files;
  for (const char* name :
       {"baseline-kv-allocate-clear-free-pass.yaml", "chip-hang-prefill-needs-cores-reset.yaml",
        "baseline-one-sequence-prefill-decode-passes.yaml"}) {
    files += " " + quoted(dir / name);
  }
  expect_merge_identical(
      "scenario" + files + " --policy-bug single-level --calbin-dir " + tiny_dir_, 2, 1);
}

TEST_F(ShardMerge, WrongSetsOfShardsAreRefusedByName) {
  const std::string args = "scenario --campaign 4 --seed 9 --calbin-dir " + tiny_dir_;
  const fs::path s0 = run_in("s0", args + " --shard 0/2", 0);
  const fs::path s1 = run_in("s1", args + " --shard 1/2", 0);
  const fs::path other = run_in(
      "other", "scenario --campaign 4 --seed 10 --calbin-dir " + tiny_dir_ + " --shard 1/2", 0);
  const fs::path whole = run_in("whole", args, 0);
  // A shard cut short: its summary line never written.
  const fs::path cut = dir_ / "cut.jsonl";
  {
    std::vector<json> lines = records_of(s1);
    std::ofstream out(cut);
    for (size_t i = 0; i + 1 < lines.size(); ++i) out << lines[i].dump() << "\n";
  }
  // Shard 0's plans again, labelled as shard 1.
  const fs::path relabelled = dir_ / "relabelled.jsonl";
  {
    std::vector<json> lines = records_of(s0);
    lines.back()["shard"]["index"] = 1;
    std::ofstream out(relabelled);
    for (const json& line : lines) out << line.dump() << "\n";
  }
  const fs::path garbage = dir_ / "garbage.jsonl";
  std::ofstream(garbage) << "{\"record\": \"plan\", \"ind";
  struct Bad {
    std::vector<fs::path> files;
    std::string needle;
  };
  const std::vector<Bad> cases = {
      {{s0}, "shard 1/2 is missing"},
      {{s0, s0, s1}, "shard 0/2 given twice"},
      {{s0, cut}, cut.string() + ": no summary line"},
      {{s0, other}, "not the same run"},
      {{s0, whole}, whole.string() + ": the summary has no \"shard\""},
      {{s0, relabelled}, "was also run by"},
      {{s0, garbage}, garbage.string() + ":1: not a calrt --jsonl record"},
      {{s0, dir_ / "absent.jsonl"}, "absent.jsonl: cannot be read"},
  };
  for (const Bad& bad : cases) {
    std::string list;
    for (const fs::path& p : bad.files) list += " " + quoted(p);
    const CalrtRun run = run_calrt("merge" + list + " --out " + quoted(dir_ / "m.jsonl"));
    EXPECT_EQ(run.exit_code, 2) << list << "\n" << run.output;
    EXPECT_NE(run.output.find(bad.needle), std::string::npos) << bad.needle << "\n" << run.output;
    EXPECT_FALSE(fs::exists(dir_ / "m.jsonl")) << "nothing half-written";
  }
}

}  // namespace
