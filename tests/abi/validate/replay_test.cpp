// The acceptance of the layer: a smoke run recorded through it replays on the simulator with
// identical results (in process, through libcalrt_sim.so, and with the `calrt` executable);
// a recording with one input byte or one CSR changed replays with divergences naming the
// call; bad recordings are clear errors; the conformance suite still passes through the
// layer, in process and as libcalrt_validate.so.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "abi/validate/codec.hpp"
#include "runner/conformance/conformance.hpp"
#include "runner/core/device/device_select.hpp"
#include "runner/smoke/smoke.hpp"
#include "runner/tools/replay.hpp"
#include "tests/runner/calrt_process.hpp"
#include "tests/runner/scratch_dir_test.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::vector<json> read_lines(const fs::path& path) {
  std::ifstream stream(path);
  std::vector<json> lines;
  std::string text;
  while (std::getline(stream, text)) {
    lines.push_back(json::parse(text));
  }
  return lines;
}

void write_lines(const fs::path& path, const std::vector<json>& lines) {
  std::ofstream stream(path);
  for (const json& line : lines) {
    stream << line.dump() << "\n";
  }
}

std::string divergences(const runner::ReplayResult& result) {
  std::string text;
  for (const runner::Divergence& d : result.divergences) {
    text += runner::describe(d) + "\n";
  }
  return text;
}

// One recorded smoke run, shared by the tests of this suite (a smoke takes seconds).
class SmokeRecording : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("calrt_validate_replay_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    recording_ = dir_ / "smoke.jsonl";
    runner::SmokeOptions options;
    options.calbin = CALRT_TEST_CALBIN;
    options.device = "validate:sim";
    runner::set_record_file(recording_.string());
    smoke_exit_ = runner::run_smoke(options);
    runner::set_record_file("");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static runner::ReplayResult replay(const fs::path& file, const std::string& device = "sim") {
    const calrt::Api api = runner::open_runtime(runner::parse_device(device));
    return runner::replay_recording(api, file);
  }

  static inline fs::path dir_;
  static inline fs::path recording_;
  static inline int smoke_exit_ = -1;
};

// The smoke's KV step frees one handle twice on purpose (it checks INVALID_HANDLE): that is
// the only call the layer may refuse, and it refuses it with the runtime's own code, so the
// smoke still passes.
TEST_F(SmokeRecording, SmokePassesThroughTheLayerWithOnlyItsDeliberateDoubleFree) {
  ASSERT_EQ(smoke_exit_, 0);
  const std::vector<json> lines = read_lines(recording_);
  ASSERT_GT(lines.size(), 100u);
  EXPECT_EQ(lines[0]["schema"], "calrt-calls/1");
  std::vector<std::string> violations;
  for (const json& line : lines) {
    if (line.contains("violations")) {
      for (const json& v : line["violations"]) {
        violations.push_back(line["call"].get<std::string>() + " " + v["id"].get<std::string>() +
                             (v["refused"].get<bool>() ? " refused " : " reported ") +
                             line["code_name"].get<std::string>());
      }
    }
  }
  EXPECT_EQ(violations, std::vector<std::string>{"Kv_Free KV.free-twice refused INVALID_HANDLE"});
}

TEST_F(SmokeRecording, ReplaysIdenticallyInProcess) {
  ASSERT_EQ(smoke_exit_, 0);
  const auto start = std::chrono::steady_clock::now();
  const runner::ReplayResult result = replay(recording_);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(divergences(result), "");
  // Every line but the header is replayed, except the refused double free, which never
  // reached the runtime.
  EXPECT_EQ(result.calls + result.skipped + 1, read_lines(recording_).size());
  EXPECT_EQ(result.skipped, 1u);
  std::printf("smoke recording: %llu calls, %llu bytes, replayed in %.1f ms\n",
              static_cast<unsigned long long>(result.calls),
              static_cast<unsigned long long>(fs::file_size(recording_)), ms);
  RecordProperty("calls", std::to_string(result.calls));
  RecordProperty("recording_bytes", std::to_string(fs::file_size(recording_)));
  RecordProperty("replay_ms", std::to_string(ms));
}

TEST_F(SmokeRecording, ReplaysIdenticallyThroughTheSimulatorLibrary) {
  ASSERT_EQ(smoke_exit_, 0);
  EXPECT_EQ(divergences(replay(recording_, CALRT_SIM_SO)), "");
}

TEST_F(SmokeRecording, AlteredInputByteDiverges) {
  ASSERT_EQ(smoke_exit_, 0);
  std::vector<json> lines = read_lines(recording_);
  // The last input written before the first job: the first prefill's tokens or positions.
  size_t target = 0;
  for (size_t i = 1; i < lines.size() && lines[i]["call"] != "Job_Submit"; ++i) {
    if (lines[i]["call"] == "Buffer_Unmap" && lines[i]["in"].contains("data")) {
      target = i;
    }
  }
  ASSERT_NE(target, 0u);
  auto bytes = calrt::validate::base64_decode(lines[target]["in"]["data"].get<std::string>());
  ASSERT_TRUE(bytes && !bytes->empty());
  (*bytes)[0] ^= 1;
  lines[target]["in"]["data"] = calrt::validate::base64_encode(*bytes);
  const fs::path altered = dir_ / "altered-byte.jsonl";
  write_lines(altered, lines);
  const runner::ReplayResult result = replay(altered);
  ASSERT_FALSE(result.divergences.empty());
  bool named = false;
  for (const runner::Divergence& d : result.divergences) {
    named = named || (d.call == "Buffer_Unmap" && d.what == "output sha256");
  }
  EXPECT_TRUE(named) << divergences(result);
}

TEST_F(SmokeRecording, AlteredCsrDiverges) {
  ASSERT_EQ(smoke_exit_, 0);
  std::vector<json> lines = read_lines(recording_);
  size_t target = 0;
  // The first prefill longer than one token: its cur_seq_len, one shorter, leaves the
  // last prompt token out, so every later output differs.
  for (size_t i = 1; i < lines.size() && target == 0; ++i) {
    if (lines[i]["call"] == "Buffer_SetCsr" && lines[i]["in"]["value"].get<uint64_t>() > 1) {
      target = i;
    }
  }
  ASSERT_NE(target, 0u);
  lines[target]["in"]["value"] = lines[target]["in"]["value"].get<uint64_t>() - 1;
  const fs::path altered = dir_ / "altered-csr.jsonl";
  write_lines(altered, lines);
  const runner::ReplayResult result = replay(altered);
  ASSERT_FALSE(result.divergences.empty());
  EXPECT_FALSE(result.divergences.front().call.empty());
  std::printf("first divergence: %s\n", runner::describe(result.divergences.front()).c_str());
}

TEST_F(SmokeRecording, TheExecutableReplaysAndReports) {
  ASSERT_EQ(smoke_exit_, 0);
  const fs::path report = dir_ / "replay.json";
  const CalrtRun run = run_calrt("replay " + quoted(recording_) + " --device " +
                                 quoted(CALRT_SIM_SO) + " --json " + quoted(report));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("calls: identical"), std::string::npos) << run.output;
  std::ifstream stream(report);
  const json doc = json::parse(stream);
  EXPECT_EQ(doc["result"], "PASS");

  const CalrtRun diverged = run_calrt("replay " + quoted(dir_ / "altered-byte.jsonl"));
  if (fs::exists(dir_ / "altered-byte.jsonl")) {
    EXPECT_EQ(diverged.exit_code, 1) << diverged.output;
    EXPECT_NE(diverged.output.find("Buffer_Unmap: output sha256: expected "), std::string::npos)
        << diverged.output;
    EXPECT_NE(diverged.output.find(" divergences"), std::string::npos) << diverged.output;
  }
}

class BadRecording : public ScratchDirTest {
 protected:
  std::string error_of(const std::string& content) {
    const fs::path file = dir_ / "bad.jsonl";
    std::ofstream(file) << content;
    try {
      const calrt::Api api = runner::open_runtime(runner::parse_device("sim"));
      runner::replay_recording(api, file);
    } catch (const runner::ReplayInputError& error) {
      return error.what();
    }
    return "no error";
  }
};

TEST_F(BadRecording, ErrorsNameFileLineAndField) {
  const std::string header = R"({"schema":"calrt-calls/1","abi":{},"runtime":"x"})"
                             "\n";
  EXPECT_NE(error_of("").find("bad.jsonl:1: field 'schema'"), std::string::npos);
  EXPECT_NE(error_of(R"({"schema":"other/1"})").find("bad.jsonl:1: field 'schema'"),
            std::string::npos);
  EXPECT_NE(
      error_of(header + R"({"seq":0,"in":{},"code":0})" + "\n").find("bad.jsonl:2: field 'call'"),
      std::string::npos);
  EXPECT_NE(error_of(header + R"({"seq":0,"call":"Device_Create","in":{"kind":2},"code":0})" + "\n")
                .find("bad.jsonl:2: field 'in.index'"),
            std::string::npos);
  EXPECT_NE(error_of(header + R"({"seq":0,"call":"Kv_Free","in":{"kv":"kv#9"},"code":0})" + "\n")
                .find("'kv#9' is not created"),
            std::string::npos);
  EXPECT_NE(error_of(header + R"({"seq":0,"call":"Nope","in":{},"code":0})" + "\n")
                .find("unknown call 'Nope'"),
            std::string::npos);
  EXPECT_NE(error_of(header + "not json\n{}\n").find("bad.jsonl:2: field '(line)'"),
            std::string::npos);
}

TEST_F(BadRecording, TheExecutableExitsTwo) {
  const fs::path file = dir_ / "bad.jsonl";
  std::ofstream(file) << R"({"schema":"calrt-calls/0"})"
                      << "\n";
  const CalrtRun run = run_calrt("replay " + quoted(file));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("bad.jsonl:1: field 'schema'"), std::string::npos) << run.output;
  const CalrtRun missing = run_calrt("replay " + quoted(dir_ / "missing.jsonl"));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("missing.jsonl"), std::string::npos) << missing.output;
}

// The layer is transparent for correct usage; the clauses that misuse the API on purpose
// (double free, forged handles, maps while in flight, bad CSRs) are refused with the code
// the runtime itself gives. VER.2 needs the backend's own CalrtGetApi, which the in-process
// layer has none of: it is SKIP there and passes through libcalrt_validate.so.
std::string failures(const std::vector<runner::ClauseResult>& results,
                     const std::vector<std::string>& allowed_skips) {
  std::string text;
  for (const runner::ClauseResult& r : results) {
    const bool allowed =
        r.verdict == runner::ClauseResult::Verdict::skip &&
        std::find(allowed_skips.begin(), allowed_skips.end(), r.id) != allowed_skips.end();
    if (r.verdict != runner::ClauseResult::Verdict::pass && !allowed) {
      text += std::string(runner::to_string(r.verdict)) + " " + r.id + ": " + r.reason + "\n";
    }
  }
  return text;
}

runner::ConformanceOptions conformance_options() {
  runner::ConformanceOptions o;
  o.calbin = CALRT_TEST_CALBIN;
  return o;
}

TEST(ValidateConformance, InProcessLayerPassesEveryClause) {
  const runner::DeviceSpec spec = runner::parse_device("validate:sim");
  const calrt::Api api = runner::open_runtime(spec);
  const auto results = runner::run_conformance(api, spec, conformance_options());
  EXPECT_EQ(results.size(), runner::conformance_clauses().size());
  EXPECT_EQ(failures(results, {"VER.2"}), "");
}

TEST(ValidateConformance, SharedLibraryLayerPassesEveryClause) {
  ::setenv("CALRT_VALIDATE_RUNTIME", CALRT_SIM_SO, 1);
  const runner::DeviceSpec spec = runner::parse_device(CALRT_VALIDATE_SO);
  const calrt::Api api = runner::open_runtime(spec);
  const auto results = runner::run_conformance(api, spec, conformance_options());
  EXPECT_EQ(failures(results, {}), "");
}

TEST(ValidateConformance, TheExecutablePassesThroughTheLayer) {
  const CalrtRun run =
      run_calrt("conformance --device validate:sim --calbin " + quoted(CALRT_TEST_CALBIN));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
}

class SharedLibraryLayer : public ScratchDirTest {};

TEST_F(SharedLibraryLayer, AnyHostRecordsThroughIt) {
  const fs::path recording = dir_ / "so.jsonl";
  const CalrtRun run =
      run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --device " + quoted(CALRT_VALIDATE_SO));
  // Without CALRT_VALIDATE_RUNTIME the library serves no table: a clean load error.
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("CALRT_VALIDATE_RUNTIME"), std::string::npos) << run.output;
  const std::string env = "CALRT_VALIDATE_RUNTIME=" + quoted(CALRT_SIM_SO) +
                          " CALRT_VALIDATE_RECORD=" + quoted(recording) + " ";
  const std::string command = "'" + std::string(CALRT_EXE) + "' smoke " +
                              quoted(CALRT_TEST_CALBIN) + " --device " + quoted(CALRT_VALIDATE_SO) +
                              " 2>&1";
  FILE* pipe = popen((env + command).c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char chunk[4096];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof(chunk), pipe)) > 0) {
    output.append(chunk, got);
  }
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  const CalrtRun replayed = run_calrt("replay " + quoted(recording));
  EXPECT_EQ(replayed.exit_code, 0) << replayed.output;
  EXPECT_NE(replayed.output.find("calls: identical"), std::string::npos) << replayed.output;
}

}  // namespace
