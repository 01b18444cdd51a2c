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
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "abi/call_table.hpp"
#include "abi/calrt_ext.hpp"
#include "abi/validate/codec.hpp"
#include "runner/conformance/conformance.hpp"
#include "runner/core/device/device_select.hpp"
#include "runner/core/session.hpp"
#include "runner/core/submission_inputs.hpp"
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

// A recording cut mid-line (its writer was killed) replays the calls before the cut, and says
// that the end is missing instead of calling the run identical without a word.
TEST_F(SmokeRecording, ARecordingCutMidLineIsReplayedWithAWarning) {
  ASSERT_EQ(smoke_exit_, 0);
  std::ifstream in(recording_);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_GT(lines.size(), 10u);
  const fs::path cut = dir_ / "cut.jsonl";
  {
    std::ofstream out(cut);
    for (size_t i = 0; i < 10; ++i) out << lines[i] << "\n";
    out << lines[10].substr(0, lines[10].size() / 2);
  }
  const fs::path report = dir_ / "cut.json";
  const CalrtRun run = run_calrt("replay " + quoted(cut) + " --json " + quoted(report));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("cut.jsonl:11: the last line is cut short"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("identical up to the cut line"), std::string::npos) << run.output;
  std::ifstream stream(report);
  const json doc = json::parse(stream);
  ASSERT_TRUE(doc.contains("warnings")) << doc.dump();
  EXPECT_NE(doc["warnings"][0].get<std::string>().find("cut short"), std::string::npos);
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

// ---- Every call of the call table, recorded and replayed --------------------------------

constexpr calrt::Timeout kWait = std::chrono::seconds(30);

// Makes every call of the table's core and extension lists at least once, each succeeding,
// through `api`. Only input tensors are mapped: the recording then holds no hash of computed
// bytes, only codes, states and sizes, which any simulator build reproduces.
void make_every_call(const calrt::Api& api) {
  calrt::Device device = calrt::Device::create(api, calrt::DeviceKind::sim, 0, "seed=1");
  (void)device.status();
  (void)device.chip_status(0);
  device.set_parallel_mode(false);
  const auto clock = calrt::DeviceClock::of(device);
  (void)clock.now();
  clock.host_spend(std::chrono::microseconds(5));
  const auto trace = calrt::DeviceTrace::of(device);
  trace.start();
  const auto faults = calrt::DeviceFaults::of(device);
  faults.set_plan("");
  (void)faults.hits();
  {
    calrt::Calbin calbin = calrt::Calbin::create(device, CALRT_TEST_CALBIN, kWait);
    calbin.configure(kWait);
    const calrt::CalbinInfo info = calbin.info();
    (void)calbin.kv_capacity();
    runner::ModelIo io;
    for (const calrt::ModelDesc& model : calbin.models()) {
      if (model.type == calrt::ModelType::prefill) {
        io.desc = model;
      }
    }
    runner::StepResult step;
    runner::check_model_io(info, io, calrt::ModelType::prefill, step);  // tensors and CSRs
    ASSERT_TRUE(step.passed());
    io.input = calrt::Buffer::create(calbin, io.name(), calrt::Direction::input);
    io.output = calrt::Buffer::create(calbin, io.name(), calrt::Direction::output);
    calrt::Kv kv = calrt::Kv::allocate(calbin, 64);
    kv.apply(io.input);
    const std::vector<int32_t> tokens(4, 1);
    runner::write_submission(io, tokens, 0, 0, kWait);  // maps, unmaps and sets the CSRs
    (void)io.input.csr(0);
    calrt::Job job = calrt::Job::submit(calbin, io.name(), io.input, io.output);
    ASSERT_EQ(job.wait(kWait), calrt::WaitResult::ready);
    ASSERT_EQ(job.status().state, calrt::JobState::completed);
    job.cancel();  // a no-op on a final job
    (void)kv.info();
    kv.clear();
    kv.free();
    (void)trace.drain();
    const auto diag = calrt::DeviceDiag::of(device);
    (void)diag.report();
    (void)diag.state_hash();
  }
  (void)device.reset(calrt::ResetLevel::job_abort);
}

// The in and out fields of each call as the call table lists them (memory fields carry
// pointers, which a recording never holds).
struct TableFields {
  std::set<std::string> in, out;
};

template <class Args>
void add_table_fields(std::map<std::string, TableFields>& calls) {
  TableFields& fields = calls[calrt::calls::CallInfo<Args>::name];
  calrt::calls::for_each_field<Args>([&](const auto& field) {
    using F = std::remove_cvref_t<decltype(field)>;
    if constexpr (F::kind != calrt::calls::Kind::memory) {
      (F::dir == calrt::calls::Dir::in ? fields.in : fields.out).insert(field.name);
    }
  });
}

std::map<std::string, TableFields> table_calls() {
  std::map<std::string, TableFields> calls;
#define ADD_CALL(Group, Verb, snake) add_table_fields<Calrt_##Group##_##Verb##_Args>(calls);
  CALRT_CORE_CALLS(ADD_CALL)
  CALRT_EXT_CALLS(ADD_CALL)
#undef ADD_CALL
  return calls;
}

std::set<std::string> keys(const json& object) {
  std::set<std::string> out;
  for (const auto& [key, value] : object.items()) {
    out.insert(key);
  }
  return out;
}

class EveryCall : public ScratchDirTest {};

TEST_F(EveryCall, IsRecordedWithEveryFieldAndReplaysIdentically) {
  const fs::path recording = dir_ / "every-call.jsonl";
  runner::set_record_file(recording.string());
  {
    const calrt::Api api = runner::open_runtime(runner::parse_device("validate:sim"));
    runner::set_record_file("");
    make_every_call(api);
  }
  const std::vector<json> lines = read_lines(recording);
  const std::map<std::string, TableFields> calls = table_calls();
  std::set<std::string> seen;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string call = lines[i]["call"].get<std::string>();
    ASSERT_EQ(lines[i]["code"], 0) << lines[i].dump();
    ASSERT_EQ(calls.count(call), 1u) << call;
    seen.insert(call);
    // Every in field of the call is recorded, and every out field, and nothing else out.
    const std::set<std::string> in = keys(lines[i]["in"]);
    for (const std::string& field : calls.at(call).in) {
      EXPECT_EQ(in.count(field), 1u) << call << " in." << field;
    }
    EXPECT_EQ(keys(lines[i]["out"]), calls.at(call).out) << call;
  }
  std::set<std::string> all;
  for (const auto& [call, fields] : calls) {
    all.insert(call);
  }
  EXPECT_EQ(seen, all);

  const calrt::Api sim = runner::open_runtime(runner::parse_device("sim"));
  const runner::ReplayResult result = runner::replay_recording(sim, recording);
  EXPECT_EQ(divergences(result), "");
  EXPECT_EQ(result.calls, lines.size() - 1);
  EXPECT_EQ(result.skipped, 0u);
}

// A recording that holds only some out fields of each call (recordings/every-call.jsonl, of
// the calls make_every_call makes), as recordings kept from an older layer do: replay needs
// no more than the fields it compares, and it replays identically.
TEST_F(EveryCall, AnOlderRecordingReplaysIdentically) {
  const fs::path recording = fs::path(CALRT_TEST_RECORDINGS) / "every-call.jsonl";
  const calrt::Api sim = runner::open_runtime(runner::parse_device("sim"));
  const runner::ReplayResult result =
      runner::replay_recording(sim, recording, fs::path(CALRT_TEST_CALBIN));
  EXPECT_EQ(divergences(result), "");
  EXPECT_EQ(result.calls + 1, read_lines(recording).size());
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
