// End-to-end: the `calrt` executable on the tiny calbin of the `tiny_calbin` ctest fixture,
// in process and through libcalrt_sim.so; the injected runner bugs; bad input. Exit codes:
// 0 pass, 1 a step failed (found on the device), 2 usage or bad input (found on the host).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/runner/calrt_process.hpp"
#include "tests/runner/scratch_dir_test.hpp"

namespace fs = std::filesystem;

namespace {

// A scratch directory per test (ScratchDirTest) and a private copy of the calbin.
class ScratchTest : public ScratchDirTest {
 protected:
  // A private copy of the fixture's calbin, for tests that damage it.
  fs::path copy_calbin() const {
    const fs::path copy = dir_ / "calbin";
    fs::copy(CALRT_TEST_CALBIN, copy, fs::copy_options::recursive);
    return copy;
  }
};

nlohmann::json read_json(const fs::path& path) {
  std::ifstream stream(path);
  return nlohmann::json::parse(stream);
}

void expect_all_steps_pass(const CalrtRun& run, const fs::path& report_path) {
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json report = read_json(report_path);
  EXPECT_EQ(report["result"], "PASS");
  ASSERT_EQ(report["steps"].size(), 8u);
  for (const auto& step : report["steps"]) {
    EXPECT_EQ(step["status"], "PASS") << step.dump(2);
  }
  EXPECT_GE(report["metrics"]["cosine_min"]["value"].get<double>(), 0.995);
  EXPECT_GE(report["metrics"]["greedy_agreement"]["value"].get<double>(), 0.95);
}

using SmokeTest = ScratchTest;

TEST_F(SmokeTest, InProcessPasses) {
  if (!CALRT_TEST_IN_PROCESS) {
    GTEST_SKIP() << "calrt was built without the in-process simulator";
  }
  const fs::path report = dir_ / "report.json";
  const CalrtRun run =
      run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --device sim --json " + quoted(report));
  expect_all_steps_pass(run, report);
}

TEST_F(SmokeTest, ThroughTheSimulatorLibraryPasses) {
  const fs::path report = dir_ / "report.json";
  const CalrtRun run =
      run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --device " + quoted(CALRT_SIM_SO) +
                " --device-config 'seed=1' --json " + quoted(report));
  expect_all_steps_pass(run, report);
  EXPECT_NE(run.output.find("(library)"), std::string::npos);
}

// A decode that ranks on the device (its 40 best ids and logits): the same eight steps pass,
// and a merge that keeps one chip's candidates fails the decode step, naming a token the
// contract ranks above the device's last candidate.
TEST_F(SmokeTest, ARankedDecodePassesAndAOneChipMergeFails) {
  const fs::path report = dir_ / "report.json";
  const CalrtRun run =
      run_calrt("smoke " + quoted(CALRT_TEST_RANKED_CALBIN) + " --json " + quoted(report));
  expect_all_steps_pass(run, report);
  const CalrtRun mutant = run_calrt("smoke " + quoted(CALRT_TEST_RANKED_CALBIN) +
                                    " --device-config numerics_mutant=top_k_one_chip");
  EXPECT_EQ(mutant.exit_code, 1) << mutant.output;
  EXPECT_NE(mutant.output.find("[FAIL] 7 decode"), std::string::npos) << mutant.output;
  EXPECT_NE(mutant.output.find("left out of the device's ranked candidates"), std::string::npos)
      << mutant.output;
  // Ids local to each chip's slice repeat chip 0's: the row breaks the ABI's promise.
  const CalrtRun local = run_calrt("smoke " + quoted(CALRT_TEST_RANKED_CALBIN) +
                                   " --device-config numerics_mutant=top_k_local_ids");
  EXPECT_EQ(local.exit_code, 1) << local.output;
  EXPECT_NE(local.output.find("repeats id"), std::string::npos) << local.output;
}

TEST_F(SmokeTest, DeviceSideErrorIsExitOne) {
  const CalrtRun run =
      run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --device-config 'bogus=1'");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("Device_Create: INVALID_ARGUMENT (request)"), std::string::npos)
      << run.output;
}

// A job still running at --timeout-ms (device time: every job waits 1 s before its input
// DMA here) is cancelled, and the failure says so and names the bound.
TEST_F(SmokeTest, AJobPastTheTimeoutIsCancelledAndNamed) {
  const CalrtRun run = run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) +
                                 " --timeout-ms 5 --device-config 'submit_overhead_ns=1000000000'");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("job did not finish within 5 ms (timed out, cancelled)"),
            std::string::npos)
      << run.output;
  // Nothing reached a comparison: the summaries say so instead of a perfect cosine.
  EXPECT_NE(run.output.find("no prefill row compared"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("steps: no decode row compared"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("cosine min 1.000000"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("free-running not run (no case reached it)"), std::string::npos)
      << run.output;
}

// The runtime names the ABI's device kind; calrt adds the flag a user would type.
TEST_F(SmokeTest, APcieKindOnTheSimulatorNamesTheFlag) {
  const CalrtRun run = run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --device-kind pcie");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("Device_Create: NOT_FOUND"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("--device-kind sim selects the simulated device"), std::string::npos)
      << run.output;
}

TEST_F(SmokeTest, ModelNamesAreMatchedExactly) {
  const CalrtRun run =
      run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --prefill-model qwen3_tiny_prefill");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("no model named exactly 'qwen3_tiny_prefill'"), std::string::npos)
      << run.output;
}

struct BugCase {
  const char* bug;
  const char* pointing;  // a regex the diagnosis must match
};

// Readable test names in ctest instead of a byte dump of the parameter.
void PrintTo(const BugCase& bug_case, std::ostream* out) { *out << bug_case.bug; }

class InjectedBugTest : public ::testing::TestWithParam<BugCase> {};

TEST_P(InjectedBugTest, FailsAndPointsAtTheCause) {
  const CalrtRun run = run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --cases len17,len2 " +
                                 "--inject-runner-bug " + GetParam().bug);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("[FAIL] 7 decode"), std::string::npos) << run.output;
  EXPECT_TRUE(std::regex_search(run.output, std::regex(GetParam().pointing))) << run.output;
}

INSTANTIATE_TEST_SUITE_P(
    Bugs, InjectedBugTest,
    ::testing::Values(
        BugCase{"past-kv", R"(hint: past_kv_cur_seq_len \d+ != KV fill level \d+ before the job; )"
                           R"(the positions start at the fill level)"},
        BugCase{"position", R"(hint: position \d+ != past_kv_cur_seq_len \d+)"},
        BugCase{"stale-kv", R"(fill level 0 before the job[^]*stale or wrong KV handle)"}),
    [](const auto& param_info) {
      std::string name = param_info.param.bug;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// What a step did not check it does not count: a decode that stops short (the past-kv bug
// fails the KV bookkeeping after the first step of each case) fails step 7 naming the cases,
// and step 6 says determinism was not checked rather than "deterministic 0/2".
TEST(SmokeLines, WorkNotDoneIsNotReportedAsChecked) {
  const CalrtRun run = run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) +
                                 " --cases len17,len2 --inject-runner-bug past-kv");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("determinism not checked (no case reached its second prefill)"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("deterministic 0/"), std::string::npos) << run.output;
  EXPECT_TRUE(
      std::regex_search(run.output, std::regex(R"(\[FAIL\] 7 decode .* \d+ of 16 steps: )")))
      << run.output;
  EXPECT_TRUE(std::regex_search(
      run.output,
      std::regex(R"(\d+ of 16 teacher-forced decode steps ran: cases len17, len2 stopped)")))
      << run.output;
}

// On a terminal the smoke draws a progress line over the golden cases and erases it before
// steps 5-7 print; --quiet draws none; output that is not a terminal never gets one.
TEST_F(SmokeTest, ProgressOnlyOnATerminalAndNotWithQuiet) {
  const std::string smoke = std::string(CALRT_EXE) + " smoke " + quoted(CALRT_TEST_CALBIN);
  const CalrtRun piped = run_calrt("smoke " + quoted(CALRT_TEST_CALBIN));
  ASSERT_EQ(piped.exit_code, 0) << piped.output;
  EXPECT_EQ(piped.output.find('\r'), std::string::npos);
  // script(1) runs it on a pseudo-terminal and copies what it drew.
  const CalrtRun tty = run_command("script -qec " + shell_quoted(smoke) + " /dev/null");
  ASSERT_EQ(tty.exit_code, 0) << tty.output;
  EXPECT_NE(tty.output.find("\rgolden cases 0/8 (len1)"), std::string::npos) << tty.output;
  EXPECT_NE(tty.output.find("\r\x1b[K[PASS] 5 inputs"), std::string::npos) << tty.output;
  const CalrtRun quiet =
      run_command("script -qec " + shell_quoted(smoke + " --quiet") + " /dev/null");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(quiet.output.find("\rgolden cases"), std::string::npos) << quiet.output;
}

// JUnit: one testcase per step; a failed step's failures and diagnosis are its message.
TEST_F(SmokeTest, JunitHasOneTestcasePerStep) {
  const fs::path junit = dir_ / "smoke.xml";
  const CalrtRun bad =
      run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) +
                " --cases len2 --inject-runner-bug position --junit " + quoted(junit));
  ASSERT_EQ(bad.exit_code, 1) << bad.output;
  std::ifstream stream(junit);
  const std::string xml((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
  EXPECT_NE(xml.find(R"(<testsuite name="smoke" tests="8" failures="1")"), std::string::npos)
      << xml;
  EXPECT_TRUE(std::regex_search(
      xml,
      std::regex(
          R"(<testcase classname="smoke" name="7 decode"[^>]*>\s*<failure message="decode logits cosine)")))
      << xml;
  const CalrtRun good =
      run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --cases len2 --junit " + quoted(junit));
  ASSERT_EQ(good.exit_code, 0) << good.output;
  std::ifstream again(junit);
  const std::string clean((std::istreambuf_iterator<char>(again)),
                          std::istreambuf_iterator<char>());
  EXPECT_NE(clean.find(R"(tests="8" failures="0")"), std::string::npos) << clean;
  EXPECT_EQ(run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --json " + quoted(junit) +
                      " --junit " + quoted(junit))
                .exit_code,
            2);
}

// Bad input: exit 2, a message naming the file and the field, no crash.
struct BadInput {
  const char* name;
  std::function<std::string(const fs::path& calbin, const fs::path& scratch)> damage;  // args
  std::vector<std::string> expected;  // substrings of the output
};

void edit_manifest(const fs::path& calbin, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json manifest = read_json(calbin / "manifest.json");
  edit(manifest);
  std::ofstream(calbin / "manifest.json") << manifest.dump(2);
}

// A ranked decode's outputs that the runner does not read as the ABI says (ids row-major
// int32 [batch, K], logits bf16 [batch, K]) fail step 2 naming the tensor and the field,
// before any job.
TEST_F(SmokeTest, ARankedOutputOfAnotherLayoutFailsStepTwo) {
  const fs::path copy = dir_ / "ranked";
  fs::copy(CALRT_TEST_RANKED_CALBIN, copy, fs::copy_options::recursive);
  edit_manifest(copy, [](nlohmann::json& m) {
    for (auto& model : m["models"]) {
      for (auto& t : model["outputs"]) {
        if (t["role"] == "top_ids") t["layout"] = {{"kind", "tiled"}, {"tile_d0", 40}};
      }
    }
  });
  const CalrtRun run = run_calrt("smoke " + quoted(copy));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("[FAIL] 2 calbin"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("tensor top_ids: layout: expected row_major, actual tiled"),
            std::string::npos)
      << run.output;
}

std::vector<BadInput> bad_inputs() {
  return {
      {"missing_calbin_dir",
       [](const fs::path&, const fs::path& s) { return quoted(s / "no_such_calbin"); },
       {"no_such_calbin", "not a calbin directory"}},
      {"missing_file",
       [](const fs::path& c, const fs::path&) {
         fs::remove(c / "param_blk2.bin");
         return quoted(c);
       },
       {"param_blk2.bin", "missing"}},
      {"truncated_param_block",
       [](const fs::path& c, const fs::path&) {
         fs::resize_file(c / "param_blk1.bin", fs::file_size(c / "param_blk1.bin") / 2);
         return quoted(c);
       },
       {"param_blk1.bin", "size"}},
      {"corrupt_file",
       [](const fs::path& c, const fs::path&) {
         std::fstream f(c / "param_blk0.bin", std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(10);
         f.put('\x5A');
         return quoted(c);
       },
       {"param_blk0.bin", "sha256"}},
      {"malformed_manifest",
       [](const fs::path& c, const fs::path&) {
         std::ofstream(c / "manifest.json") << "{\"schema\": 1, ";
         return quoted(c);
       },
       {"manifest.json", "malformed JSON"}},
      {"unknown_dtype",
       [](const fs::path& c, const fs::path&) {
         edit_manifest(c,
                       [](nlohmann::json& m) { m["models"][0]["inputs"][0]["dtype"] = "int77"; });
         return quoted(c);
       },
       {"manifest.json", "models[0].inputs[0].dtype", "int77"}},
      {"tensor_bigger_than_buffer",
       [](const fs::path& c, const fs::path&) {
         edit_manifest(c, [](nlohmann::json& m) {
           auto& logits = m["models"][1]["outputs"][0];
           logits["shape"][1] = logits["shape"][1].get<int64_t>() * 2;
         });
         return quoted(c);
       },
       {"manifest.json", "models[1].outputs[0]"}},
      // A key given twice: JSON readers disagree on which counts, so the manifest is refused.
      {"manifest_key_given_twice",
       [](const fs::path& c, const fs::path&) {
         std::ifstream in(c / "manifest.json");
         std::string text((std::istreambuf_iterator<char>(in)), {});
         text.insert(text.find("\"vocab\":"), "\"vocab\": 32000, ");
         std::ofstream(c / "manifest.json") << text;
         return quoted(c);
       },
       {"manifest.json", "llm.vocab", "twice"}},
      {"llm_layers_zero",
       [](const fs::path& c, const fs::path&) {
         edit_manifest(c, [](nlohmann::json& m) { m["llm"]["layers"] = 0; });
         return quoted(c);
       },
       {"manifest.json", "llm.layers", "0"}},
      {"golden_dir_missing",
       [](const fs::path& c, const fs::path&) {
         fs::remove_all(c / "golden");
         return quoted(c);
       },
       {"golden/", "missing"}},
      // The manifest's golden.index is the file read, whatever its name: a named index that
      // does not exist, or one that disagrees with the calbin, is bad input.
      {"golden_index_named_missing",
       [](const fs::path& c, const fs::path&) {
         edit_manifest(c, [](nlohmann::json& m) { m["golden"]["index"] = "golden/other.json"; });
         return quoted(c);
       },
       {"other.json"}},
      {"golden_index_named_other_vocab",
       [](const fs::path& c, const fs::path&) {
         nlohmann::json index = read_json(c / "golden" / "golden.json");
         index["vocab"] = index["vocab"].get<int64_t>() + 1;
         std::ofstream(c / "golden" / "other.json") << index.dump(2);
         edit_manifest(c, [](nlohmann::json& m) { m["golden"]["index"] = "golden/other.json"; });
         return quoted(c);
       },
       {"1001", "vocab"}},
      {"golden_option_missing",
       [](const fs::path& c, const fs::path& s) {
         return quoted(c) + " --golden " + quoted(s / "no_golden");
       },
       {"no_golden", "golden directory does not exist"}},
      {"unknown_case",
       [](const fs::path& c, const fs::path&) { return quoted(c) + " --cases len17,nope"; },
       {"--cases", "'nope'"}},
      // Malformed service endpoints: bad input, not a failed device step (exit 1 before).
      {"endpoint_unix_empty",
       [](const fs::path& c, const fs::path&) { return quoted(c) + " --device unix:"; },
       {"--device", "'unix:'", "socket path is empty"}},
      {"endpoint_tcp_no_port",
       [](const fs::path& c, const fs::path&) { return quoted(c) + " --device tcp:127.0.0.1"; },
       {"--device", "'tcp:127.0.0.1'", "expected tcp:HOST:PORT"}},
      {"endpoint_tcp_port_out_of_range",
       [](const fs::path& c, const fs::path&) {
         return quoted(c) + " --device tcp:127.0.0.1:107777";
       },
       {"--device", "port '107777'", "1..65535"}},
      // A word that is no path and no library is a mistyped form: the forms and the nearest.
      {"device_form_mistyped",
       [](const fs::path& c, const fs::path&) { return quoted(c) + " --device simm"; },
       {"--device 'simm'", "did you mean sim?", "unix:SOCKET or tcp:HOST:PORT"}},
      {"runtime_library_missing",
       [](const fs::path& c, const fs::path& s) {
         return quoted(c) + " --device " + quoted(s / "libnothing.so");
       },
       {"libnothing.so", "cannot load CalRT runtime", "--device takes sim"}},
  };
}

void PrintTo(const BadInput& input, std::ostream* out) { *out << input.name; }

class BadInputTest : public ScratchTest, public ::testing::WithParamInterface<BadInput> {};

TEST_P(BadInputTest, ExitsTwoNamingTheFileAndField) {
  const fs::path calbin = copy_calbin();
  const fs::path report = dir_ / "report.json";
  const std::string args = GetParam().damage(calbin, dir_);
  const CalrtRun run = run_calrt("smoke " + args + " --json " + quoted(report));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  for (const std::string& text : GetParam().expected) {
    EXPECT_NE(run.output.find(text), std::string::npos) << "missing '" << text << "' in\n"
                                                        << run.output;
  }
  ASSERT_TRUE(fs::exists(report)) << run.output;
  EXPECT_EQ(read_json(report)["result"], "ERROR");
}

INSTANTIATE_TEST_SUITE_P(Inputs, BadInputTest, ::testing::ValuesIn(bad_inputs()),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// A report path that cannot be written stops the smoke before its first device step, not
// after the whole run (/proc takes no new file, root included).
TEST_F(ScratchTest, AnUnwritableReportPathStopsTheSmokeBeforeItRuns) {
  const CalrtRun run = run_calrt("smoke " + quoted(copy_calbin()) + " --junit /proc/smoke.xml");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--junit '/proc/smoke.xml'"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("PASS"), std::string::npos) << run.output;
}

// The device's loader refuses a memory plan that would let one buffer overwrite another, so
// the smoke fails at its calbin step even when nobody ran `calrt check` (a device step that
// fails: exit 1, not bad input).
TEST_F(ScratchTest, ABrokenMemoryPlanFailsTheSmokeOnTheDevice) {
  const fs::path calbin = copy_calbin();
  edit_manifest(calbin, [](nlohmann::json& m) {
    for (auto& r : m["reservations"]) {
      if (r["name"] == "kv_cache" && r["chip"] == 0) r["base"] = 4096;  // inside the params
    }
  });
  const CalrtRun run = run_calrt("smoke " + quoted(calbin));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("CALBIN_INVALID"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("\"kv_cache\""), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("\"params\""), std::string::npos) << run.output;
}

TEST(Usage, NoArgumentsOrBadOptionsExitTwo) {
  EXPECT_EQ(run_calrt("").exit_code, 2);
  EXPECT_EQ(run_calrt("smoke").exit_code, 2);
  EXPECT_EQ(run_calrt("smoke x --min-cosine 2").exit_code, 2);
  EXPECT_EQ(run_calrt("smoke x --inject-runner-bug nonsense").exit_code, 2);
  const CalrtRun help = run_calrt("smoke --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("TEST ONLY"), std::string::npos);
}

TEST(Info, ShowsDeviceAndChips) {
  const CalrtRun run = run_calrt("info --device " + quoted(CALRT_SIM_SO));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("state OPEN"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("chip 0"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("chip 1"), std::string::npos) << run.output;
}

// `calrt reset`: Device_Reset at the level, then the status, whose reset count shows it.
TEST_F(SmokeTest, ResetResetsAtTheLevelAndShowsTheStatus) {
  const fs::path json = dir_ / "reset.json";
  const CalrtRun run =
      run_calrt("reset --level chip --device " + quoted(CALRT_SIM_SO) + " --json " + quoted(json));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("reset chip: device OPEN"), std::string::npos) << run.output;
  const nlohmann::json doc = read_json(json);
  EXPECT_EQ(doc["command"], "reset");
  EXPECT_EQ(doc["reset"]["level"], "chip");
  EXPECT_EQ(doc["status"]["reset_count"], 1);
  // Without a reset the count stays 0: the figure above comes from the reset.
  const CalrtRun info = run_calrt("info --json " + quoted(json));
  ASSERT_EQ(info.exit_code, 0) << info.output;
  EXPECT_EQ(read_json(json)["status"]["reset_count"], 0);
  EXPECT_EQ(run_calrt("reset --level sideways").exit_code, 2);
  EXPECT_EQ(run_calrt("reset").exit_code, 2);
  const CalrtRun broken = run_calrt("reset --level full --device-config 'bogus=1'");
  EXPECT_EQ(broken.exit_code, 1) << broken.output;
  EXPECT_NE(broken.output.find("calrt reset: Device_Create"), std::string::npos) << broken.output;
}

}  // namespace
