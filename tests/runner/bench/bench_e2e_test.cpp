// End-to-end: the `calrt bench` executable on the tiny functional calbin and on the
// timing-only reference calbin (ctest fixtures tiny_calbin and reference_calbin). Option
// errors, byte-identical reruns with --host-time model, parallel against sync mode, and the
// Chrome trace.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/runner/calrt_process.hpp"
#include "tests/runner/scratch_dir_test.hpp"

namespace fs = std::filesystem;

namespace {

class BenchTest : public ScratchDirTest {
 protected:
  // `calrt bench CALBIN ARGS`, on the in-process simulator when built, else its library.
  static CalrtRun bench(const fs::path& calbin, const std::string& args) {
    const std::string device =
        CALRT_TEST_IN_PROCESS ? std::string() : std::string(" --device ") + quoted(CALRT_SIM_SO);
    return run_calrt("bench " + quoted(calbin) + device + " " + args);
  }
};

nlohmann::json read_json(const fs::path& path) {
  std::ifstream stream(path);
  return nlohmann::json::parse(stream);
}

std::string read_text(const fs::path& path) {
  std::ifstream stream(path, std::ios::binary);
  std::stringstream text;
  text << stream.rdbuf();
  return text.str();
}

// ---------------------------------------------------------------------------------------
// Options: every bad value is a usage error (exit 2) whose message names the flag.
// ---------------------------------------------------------------------------------------

struct BadOption {
  std::string args;
  std::string named;  // the message must contain this
};

TEST_F(BenchTest, BadOptionsExitTwoNamingTheFlag) {
  const std::vector<BadOption> cases = {
      {"--runs 0", "--runs"},
      {"--runs many", "--runs"},
      {"--warmup -1", "--warmup"},
      {"--concurrency 0", "--concurrency"},
      {"--prompt-len 0", "--prompt-len"},
      {"--gen-len 0", "--gen-len"},
      {"--mode fast", "--mode"},
      {"--sampling nucleus", "--sampling"},
      {"--sampling top-k --top-k 0", "--top-k"},
      {"--temperature 0", "--temperature"},
      {"--host-time cpu", "--host-time"},
      {"--host-gbps 0", "--host-gbps"},
      {"--timeout-ms 0", "--timeout-ms"},
      {"--prompt-len 4600 --gen-len 32", "--prompt-len 4600"},  // 4631 > context 4608
      {"--concurrency 4096 --prompt-len 4000 --gen-len 2", "--concurrency 4096"},
      {"--prefill-model qwen3_tiny", "--prefill-model"},  // exact names only
      {"--decode-model qwen3_tiny_prefill_c256", "--decode-model"},
      {"--json " + quoted(dir_ / "missing" / "r.json"), "--json"},
      {"--csv " + quoted(dir_), "--csv"},
      {"--trace " + quoted(dir_ / "x.json") + " --json " + quoted(dir_ / "x.json"), "--trace"},
      {"--device " + quoted(dir_ / "no-such-runtime.so"), "no-such-runtime.so"},
      {"--sweep pcie_lanes", "--sweep 'pcie_lanes'"},
      {"--sweep pcie_lanes=4,,8", "value ''"},
      {"--sweep pcie_lanes=4,4", "value '4' twice"},
      {"--sweep a=1 --sweep b=1 --sweep c=1", "--sweep given 3 times"},
      {"--sweep pcie_lanes=4 --sweep pcie_lanes=8", "the same key twice"},
      {"--sweep pcie_lanes=4 --device-config pcie_lanes=8", "sets it too"},
      {"--sweep pcie_lanes=4 --trace " + quoted(dir_ / "t.json"), "--trace with --sweep"},
      {"--sweep no_such_key=1,2", "no_such_key=1\": unknown key"},
      {"--sweep pcie_lanes=1,2,3,4,5,6,7,8,9 --sweep d2d_latency_ns=1,2,3,4,5,6,7,8",
       "72 points, more than 64"},
      {"--prompt-len 64,0", "--prompt-len"},
      {"--prompt-len 64,64", "value '64' twice"},
      {"--sweep gen_len=4,x", "value 'x' is not a count"},
      {"--prompt-len 16,32 --sweep prompt_len=64", "the same key twice"},
      {"--prompt-len 16,4600 --gen-len 32", "--prompt-len 4600"},  // its point cannot fit
  };
  for (const BadOption& c : cases) {
    const CalrtRun run = bench(CALRT_TEST_CALBIN, c.args);
    EXPECT_EQ(run.exit_code, 2) << c.args << "\n" << run.output;
    EXPECT_NE(run.output.find(c.named), std::string::npos)
        << c.args << ": the message does not name " << c.named << ":\n"
        << run.output;
  }
  const CalrtRun missing = run_calrt("bench " + quoted(dir_ / "no-calbin"));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("no-calbin"), std::string::npos) << missing.output;
}

TEST_F(BenchTest, UsageErrorFoundLateStillWritesTheReport) {
  const fs::path report = dir_ / "r.json";
  const CalrtRun run =
      bench(CALRT_TEST_CALBIN, "--prompt-len 4600 --gen-len 32 --json " + quoted(report));
  ASSERT_EQ(run.exit_code, 2) << run.output;
  const nlohmann::json doc = read_json(report);
  EXPECT_EQ(doc["schema"], "calrt-bench/3");
  EXPECT_EQ(doc["result"], "ERROR");
  EXPECT_NE(doc["error"].get<std::string>().find("--prompt-len"), std::string::npos);
}

TEST_F(BenchTest, JobTimeoutFailsWithExitOneNotAHang) {
  // A device whose compute is far too slow for a 5 ms bound: the wait returns NOT_READY, the
  // bench cancels the job and fails naming where and the bound.
  const fs::path json = dir_ / "r.json", trace = dir_ / "t.json";
  const CalrtRun run = bench(CALRT_TEST_CALBIN,
                             "--device-config 'clock_mhz=1;dram_bw_mbps=10' --prompt-len 20 "
                             "--gen-len 2 --runs 1 --concurrency 2 --mode parallel "
                             "--timeout-ms 5 --json " +
                                 quoted(json) + " --trace " + quoted(trace));
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("did not finish within --timeout-ms 5"), std::string::npos)
      << run.output;
  const nlohmann::json doc = read_json(json);
  EXPECT_EQ(doc["result"], "FAIL");
  EXPECT_NE(doc["error"].get<std::string>().find("parallel warmup 0 request 0 prefill chunk 0"),
            std::string::npos)
      << doc["error"];
  EXPECT_NO_THROW(read_json(trace));  // what was recorded up to the failure
}

// ---------------------------------------------------------------------------------------
// Determinism: identical arguments and --host-time model give byte-identical files.
// ---------------------------------------------------------------------------------------

TEST_F(BenchTest, ModelledHostTimeGivesByteIdenticalReportsAndTrace) {
  const fs::path json = dir_ / "r.json", csv = dir_ / "r.csv", trace = dir_ / "t.json";
  // Top-k sampling with a seed: the sampler's draws must be reproducible too.
  const std::string args =
      "--prompt-len 300 --gen-len 5 --runs 1 --warmup 1 --concurrency 2 --host-time model "
      "--sampling top-k --top-k 8 --temperature 0.7 --sampling-seed 11 --seed 5 --json " +
      quoted(json) + " --csv " + quoted(csv) + " --trace " + quoted(trace);
  std::map<std::string, std::string> first;
  for (int attempt = 0; attempt < 2; ++attempt) {
    const CalrtRun run = bench(CALRT_TEST_CALBIN, args);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    for (const fs::path& file : {json, csv, trace}) {
      const std::string text = read_text(file);
      ASSERT_FALSE(text.empty()) << file;
      if (attempt == 0) {
        first[file.string()] = text;
        fs::remove(file);  // the second run must write it afresh
      } else {
        EXPECT_TRUE(text == first[file.string()]) << file << " differs between identical runs";
      }
    }
  }
  // What makes the run reproducible is in the report.
  const nlohmann::json doc = read_json(json);
  EXPECT_EQ(doc["calbin"]["manifest_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(doc["settings"]["host_time"]["mode"], "model");
  EXPECT_EQ(doc["settings"]["sampling"]["seed"], 11);
  EXPECT_EQ(doc["settings"]["prompt_seed"], 5);
  EXPECT_NE(doc["command_line"].get<std::string>().find("--sampling-seed 11"), std::string::npos);
  EXPECT_FALSE(doc["device"]["runtime_version"].get<std::string>().empty());
  EXPECT_EQ(doc["device"]["abi"], "0.9.0");
  EXPECT_EQ(doc["modes"]["sync"]["metrics"]["prepare"]["clock"], "host-model");
  EXPECT_EQ(doc["modes"]["sync"]["metrics"]["ttft"]["clock"], "device");
  // The CSV: a header and one row per metric per mode.
  std::istringstream lines(first[csv.string()]);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line,
            "schema,tool_version,commit,command_line,mode,metric,clock,unit,count,min,p50,p90,"
            "p95,p99,max,mean,stddev");
  size_t rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
  }
  EXPECT_EQ(rows, 2 * doc["definitions"].size());
}

// ---------------------------------------------------------------------------------------
// Parallel against sync mode.
// ---------------------------------------------------------------------------------------

// (run, request) -> (tokens, logits fingerprints) of one mode's measured requests.
std::map<std::pair<int, int>, nlohmann::json> requests_of(const nlohmann::json& mode) {
  std::map<std::pair<int, int>, nlohmann::json> out;
  for (const auto& r : mode["requests"]) {
    out[{r["run"].get<int>(), r["request"].get<int>()}] = {r["tokens"], r["logits_xxh3_64"]};
  }
  return out;
}

TEST_F(BenchTest, ParallelIsFasterWithTwoRequestsAndBitIdentical) {
  const fs::path json = dir_ / "r.json";
  const CalrtRun run = bench(CALRT_TEST_CALBIN,
                             "--prompt-len 300 --gen-len 6 --runs 2 --concurrency 2 "
                             "--host-time model --json " +
                                 quoted(json));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json doc = read_json(json);
  const auto& sync = doc["modes"]["sync"];
  const auto& parallel = doc["modes"]["parallel"];
  ASSERT_EQ(sync["runs"].size(), parallel["runs"].size());
  for (size_t r = 0; r < sync["runs"].size(); ++r) {
    EXPECT_LT(parallel["runs"][r]["e2e_ms"].get<double>(), sync["runs"][r]["e2e_ms"].get<double>())
        << "run " << r << ": parallel mode is not faster on the device clock";
  }
  EXPECT_LT(parallel["metrics"]["e2e_time"]["p50"].get<double>(),
            sync["metrics"]["e2e_time"]["p50"].get<double>());
  EXPECT_GT(doc["comparison"]["e2e_speedup"].get<double>(), 1.0);
  // Same prompts, same steps: the same logits bit for bit, hence the same greedy tokens.
  const auto a = requests_of(sync);
  const auto b = requests_of(parallel);
  ASSERT_EQ(a.size(), 4u);  // 2 runs x 2 requests
  EXPECT_EQ(a, b);
  for (const auto& [key, value] : a) {
    EXPECT_EQ(value[0].size(), 6u);  // gen-len tokens
    EXPECT_EQ(value[1].size(), 6u);
  }
  EXPECT_TRUE(doc["comparison"]["logits_compared"].get<bool>());
  EXPECT_TRUE(doc["comparison"]["logits_identical"].get<bool>());
  EXPECT_TRUE(doc["comparison"]["tokens_identical"].get<bool>());
}

TEST_F(BenchTest, ParallelWithOneRequestIsAboutSync) {
  // One request has one job in flight at a time (its KV handle): nothing to overlap.
  const fs::path json = dir_ / "r.json";
  const CalrtRun run = bench(CALRT_TEST_CALBIN,
                             "--prompt-len 40 --gen-len 6 --runs 1 --concurrency 1 "
                             "--host-time model --json " +
                                 quoted(json));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json doc = read_json(json);
  const double speedup = doc["comparison"]["e2e_speedup"].get<double>();
  EXPECT_GT(speedup, 0.95);
  EXPECT_LT(speedup, 1.05);
  EXPECT_EQ(requests_of(doc["modes"]["sync"]), requests_of(doc["modes"]["parallel"]));
}

TEST_F(BenchTest, TimingOnlyReferenceCalbinSamplesZeroLogits) {
  // The reference preset has no weights: its logits are all zero and greedy picks id 0.
  const fs::path json = dir_ / "r.json";
  const CalrtRun run = bench(CALRT_TEST_REFERENCE_CALBIN,
                             "--prompt-len 300 --gen-len 3 --runs 1 --warmup 0 --concurrency 2 "
                             "--host-time model --json " +
                                 quoted(json));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json doc = read_json(json);
  EXPECT_TRUE(doc["calbin"]["timing_only"].get<bool>());
  for (const auto& r : doc["modes"]["sync"]["requests"]) {
    EXPECT_EQ(r["tokens"], nlohmann::json({0, 0, 0}));
    // Rows the device never computed are not fingerprinted, and the comparison says so.
    EXPECT_EQ(r["logits_xxh3_64"], nlohmann::json::array());
  }
  EXPECT_FALSE(doc["comparison"]["logits_compared"].get<bool>());
  EXPECT_TRUE(doc["comparison"]["tokens_identical"].get<bool>());
  EXPECT_NE(run.output.find("logits not compared: a timing-only calbin"), std::string::npos)
      << run.output;
  const auto& sync = doc["modes"]["sync"]["metrics"];
  EXPECT_EQ(sync["ttft"]["count"], 2);
  EXPECT_EQ(sync["tpot"]["count"], 4);           // 2 requests x 2 decode steps
  EXPECT_EQ(sync["infer_prefill"]["count"], 4);  // 2 chunks of 256 per request
  EXPECT_GT(sync["infer_prefill"]["p50"].get<double>(),
            sync["infer_decode"]["p50"].get<double>());  // a 256-token chunk outweighs a step
  EXPECT_LT(doc["modes"]["parallel"]["metrics"]["e2e_time"]["p50"].get<double>(),
            sync["e2e_time"]["p50"].get<double>());
}

// A design-space sweep over two device-config keys: every point a bench run, one CSV and JSON
// row each. The check is physical, not a copy of the figures: more D2D bandwidth never makes
// the first token later, and at a fixed D2D bandwidth the PCIe lanes hardly matter to a
// 2-chip prefill; the sweep's points are the single runs that the same config would give.
// The reference's A/B "full logits D2H vs NPU top-k": one sweep over the two packagings of
// the model. A decode row's D2H is 303872 B of BF16 logits against 40 ids and their logits
// (240 B): over PCIe the link latency is all that is left.
TEST_F(BenchTest, RankedDecodeSweptBesideTheFullRow) {
  const fs::path json = dir_ / "ab.json";
  const fs::path csv = dir_ / "ab.csv";
  const CalrtRun run = bench(CALRT_TEST_REFERENCE_CALBIN,
                             "--prompt-len 512 --gen-len 9 --runs 1 --warmup 0 --mode sync "
                             "--sweep calbin=" +
                                 std::string(CALRT_TEST_REFERENCE_CALBIN) + "," +
                                 CALRT_TEST_RANKED_REFERENCE_CALBIN + " --json " + quoted(json) +
                                 " --csv " + quoted(csv));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json doc = read_json(json);
  ASSERT_EQ(doc["points"].size(), 2u);
  const nlohmann::json& full = doc["points"][0];
  const nlohmann::json& ranked = doc["points"][1];
  EXPECT_EQ(full["config"]["calbin"], CALRT_TEST_REFERENCE_CALBIN);
  const double full_d2h = full["d2h_decode_p50_us"].get<double>();
  const double ranked_d2h = ranked["d2h_decode_p50_us"].get<double>();
  EXPECT_GT(full_d2h, 5 * ranked_d2h) << full_d2h << " vs " << ranked_d2h;
  EXPECT_TRUE(ranked["host_step_p50_us"].is_number());
  EXPECT_NE(read_text(csv).find("d2h_decode_p50_us,host_step_p50_us"), std::string::npos);
}

// A swept calbin that does not read, or gives fewer ids than --top-k, is refused before any
// point runs.
TEST_F(BenchTest, SweptCalbinsAreCheckedBeforeAnyPoint) {
  const std::string ranked = CALRT_TEST_RANKED_CALBIN;
  const CalrtRun missing = bench(CALRT_TEST_CALBIN,
                                 "--prompt-len 17 --gen-len 4 --runs 1 "
                                 "--sweep calbin=" +
                                     ranked + ",/nonexistent/calbin");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("/nonexistent/calbin"), std::string::npos) << missing.output;
  EXPECT_EQ(missing.output.find("PASS"), std::string::npos) << "ran a point first";
  const CalrtRun beyond = bench(CALRT_TEST_CALBIN,
                                "--prompt-len 17 --gen-len 4 --runs 1 --sampling top-k --top-k 41 "
                                "--sweep calbin=" +
                                    std::string(CALRT_TEST_CALBIN) + "," + ranked);
  EXPECT_EQ(beyond.exit_code, 2) << beyond.output;
  EXPECT_NE(beyond.output.find("--top-k 41"), std::string::npos) << beyond.output;
  EXPECT_EQ(beyond.output.find("PASS"), std::string::npos) << "ran a point first";
}

// Greedy takes the first id; top-k sampling draws among the device's candidates, and a k the
// device does not give is refused naming both.
TEST_F(BenchTest, RankedDecodeSamplesWithinItsCandidates) {
  const CalrtRun greedy =
      bench(CALRT_TEST_RANKED_CALBIN, "--prompt-len 17 --gen-len 8 --runs 1 --warmup 0");
  EXPECT_EQ(greedy.exit_code, 0) << greedy.output;
  const CalrtRun sampled = bench(CALRT_TEST_RANKED_CALBIN,
                                 "--prompt-len 17 --gen-len 8 --runs 1 --warmup 0 "
                                 "--sampling top-k --top-k 40 --sampling-seed 3");
  EXPECT_EQ(sampled.exit_code, 0) << sampled.output;
  const CalrtRun beyond = bench(CALRT_TEST_RANKED_CALBIN,
                                "--prompt-len 17 --gen-len 8 --runs 1 --sampling top-k --top-k 41");
  EXPECT_EQ(beyond.exit_code, 2) << beyond.output;
  EXPECT_NE(beyond.output.find("--top-k 41"), std::string::npos) << beyond.output;
  EXPECT_NE(beyond.output.find("best 40 ids only"), std::string::npos) << beyond.output;
}

TEST_F(BenchTest, SweepRunsEveryPointOfTwoKeys) {
  const fs::path csv = dir_ / "sweep.csv";
  const fs::path json = dir_ / "sweep.json";
  const std::string common =
      "--prompt-len 512 --gen-len 4 --runs 1 --warmup 0 --mode parallel "
      "--host-time model";
  const CalrtRun run =
      bench(CALRT_TEST_REFERENCE_CALBIN, common +
                                             " --sweep d2d_bw_mbps=8000,32000,128000 --sweep "
                                             "pcie_lanes=4,16 --csv " +
                                             quoted(csv) + " --json " + quoted(json));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json doc = read_json(json);
  EXPECT_EQ(doc["schema"], "calrt-bench-sweep/4");
  EXPECT_EQ(doc["result"], "PASS");
  ASSERT_EQ(doc["points"].size(), 6u);
  std::map<std::string, std::map<std::string, double>> ttft;  // [lanes][d2d]
  for (const auto& p : doc["points"]) {
    EXPECT_EQ(p["result"], "PASS");
    EXPECT_EQ(p["mode"], "parallel");
    ttft[p["config"]["pcie_lanes"]][p["config"]["d2d_bw_mbps"]] = p["ttft_p50_ms"].get<double>();
  }
  for (const auto& [lanes, by_d2d] : ttft) {
    EXPECT_GT(by_d2d.at("8000"), by_d2d.at("32000")) << "pcie_lanes " << lanes;
    EXPECT_GT(by_d2d.at("32000"), by_d2d.at("128000")) << "pcie_lanes " << lanes;
  }
  // The CSV: a header and one row per point, in the order of the keys' product.
  const std::string text = read_text(csv);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "schema,tool_version,commit,command_line,d2d_bw_mbps,pcie_lanes,result,mode,ttft_p50_"
            "ms,ttft_p99_ms,tpot_p50_ms,tpot_p99_ms,"
            "e2e_time_mean_ms,prefill_tok_s,decode_tok_s,e2e_tok_s,d2h_decode_p50_us,"
            "host_step_p50_us,error");
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 7);
  EXPECT_NE(text.find(",8000,4,PASS,parallel,"), std::string::npos) << text;
  // One point of the sweep is the plain run of its config.
  const fs::path single = dir_ / "single.json";
  const CalrtRun one =
      bench(CALRT_TEST_REFERENCE_CALBIN,
            common + " --device-config 'd2d_bw_mbps=32000;pcie_lanes=16' --json " + quoted(single));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_DOUBLE_EQ(read_json(single)["modes"]["parallel"]["metrics"]["ttft"]["p50"].get<double>(),
                   ttft["16"]["32000"]);
}

// A list given to a bench flag sweeps it, as llama-bench does: a longer prompt never gives a
// sooner first token, and a second request in flight never a shorter TPOT.
TEST_F(BenchTest, ListsOfPromptLengthsAndConcurrencySweep) {
  const fs::path json = dir_ / "sweep.json";
  const CalrtRun run = bench(CALRT_TEST_REFERENCE_CALBIN,
                             "--prompt-len 128,512 --concurrency 1,2 --gen-len 4 --runs 1 "
                             "--warmup 0 --mode parallel --host-time model --json " +
                                 quoted(json));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json doc = read_json(json);
  ASSERT_EQ(doc["points"].size(), 4u);
  std::map<std::string, nlohmann::json> at;  // "prompt/concurrency"
  for (const auto& p : doc["points"]) {
    at[p["config"]["prompt_len"].get<std::string>() + "/" +
       p["config"]["concurrency"].get<std::string>()] = p;
  }
  auto figure = [&](const std::string& point, const char* name) {
    return at.at(point)[name].get<double>();
  };
  for (const std::string c : {"1", "2"}) {
    EXPECT_LT(figure("128/" + c, "ttft_p50_ms"), figure("512/" + c, "ttft_p50_ms"));
  }
  for (const std::string prompt : {"128", "512"}) {
    EXPECT_LT(figure(prompt + "/1", "tpot_p50_ms"), figure(prompt + "/2", "tpot_p50_ms"));
  }
}

// ---------------------------------------------------------------------------------------
// The Chrome trace.
// ---------------------------------------------------------------------------------------

class TraceTest : public BenchTest {
 protected:
  // A traced bench run with `extra` options, held to what every trace must be; returns the
  // trace and the report.
  std::pair<nlohmann::json, nlohmann::json> traced(const std::string& extra) {
    check_trace(extra);
    return {read_json(dir_ / "t.json"), read_json(dir_ / "r.json")};
  }

 private:
  void check_trace(const std::string& extra);
};

void TraceTest::check_trace(const std::string& extra) {
  const fs::path trace = dir_ / "t.json", json = dir_ / "r.json";
  const CalrtRun run = bench(CALRT_TEST_CALBIN,
                             "--prompt-len 300 --gen-len 4 --runs 1 --concurrency 2 --host-time "
                             "model --trace " +
                                 quoted(trace) + " --json " + quoted(json) + " " + extra);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json doc = read_json(trace);  // throws (fails the test) if not JSON
  ASSERT_TRUE(doc.contains("traceEvents"));
  EXPECT_EQ(doc["displayTimeUnit"], "ns");

  std::map<std::pair<int, int>, std::string> threads;  // (pid, tid) -> name
  std::map<int, std::string> processes;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      threads[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
    }
    if (e["ph"] == "M" && e["name"] == "process_name") {
      processes[e["pid"].get<int>()] = e["args"]["name"];
    }
  }
  std::set<std::string> names;
  for (const auto& [key, name] : threads) {
    names.insert(processes[key.first] + "/" + name);
  }
  for (const char* wanted : {"device/chip 0", "device/chip 1", "device/PCIe H2D", "device/PCIe D2H",
                             "device/D2D", "device/queue slot 0", "host/host"}) {
    EXPECT_TRUE(names.count(wanted)) << "no track " << wanted;
  }

  // Every span has a duration >= 0; the chip segments of one job never overlap on their
  // chip's track; the host does one thing at a time.
  std::map<std::pair<std::string, uint64_t>, std::vector<std::pair<double, double>>> chip_spans;
  std::vector<std::pair<double, double>> host_spans;
  std::map<std::string, size_t> per_track;
  size_t device_events = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") {
      continue;
    }
    const double ts = e["ts"].get<double>();
    const double dur = e["dur"].get<double>();
    EXPECT_GE(dur, 0.0) << e.dump();
    EXPECT_GE(ts, 0.0) << e.dump();
    const std::string track = threads[{e["pid"].get<int>(), e["tid"].get<int>()}];
    ++per_track[processes[e["pid"].get<int>()] + "/" + track];
    if (processes[e["pid"].get<int>()] == "device") {
      ++device_events;
      ASSERT_TRUE(e["args"].contains("job")) << e.dump();
      EXPECT_TRUE(e["args"].contains("mode")) << "device job not matched: " << e.dump();
      if (track.rfind("chip ", 0) == 0) {
        chip_spans[{track, e["args"]["job"].get<uint64_t>()}].push_back({ts, ts + dur});
      }
    } else if (track == "host") {
      host_spans.push_back({ts, ts + dur});
    }
  }
  for (auto& [key, spans] : chip_spans) {
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      EXPECT_LE(spans[i - 1].second, spans[i].first + 1e-9)
          << key.first << " job " << key.second << " has overlapping segments";
    }
  }
  std::sort(host_spans.begin(), host_spans.end());
  for (size_t i = 1; i < host_spans.size(); ++i) {
    EXPECT_LE(host_spans[i - 1].second, host_spans[i].first + 1e-9) << "host spans overlap";
  }
  for (const char* track : {"device/chip 0", "device/chip 1", "device/PCIe H2D", "device/PCIe D2H",
                            "device/D2D", "device/queue slot 0", "host/host", "host/runs"}) {
    EXPECT_GT(per_track[track], 0u) << "nothing on " << track;
  }
  // Perfetto keeps only complete events that nest on their track: on every track, an event
  // begins after the enclosing one has ended or ends within it.
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> by_track;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      const double ts = e["ts"].get<double>();
      by_track[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(
          {ts, ts + e["dur"].get<double>()});
    }
  }
  for (auto& [key, spans] : by_track) {
    std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    });
    std::vector<double> open_ends;
    for (const auto& [begin, end] : spans) {
      while (!open_ends.empty() && open_ends.back() <= begin + 1e-9) open_ends.pop_back();
      EXPECT_TRUE(open_ends.empty() || end <= open_ends.back() + 1e-9)
          << threads[key] << ": [" << begin << ", " << end << "] overlaps the enclosing event "
          << "ending at " << open_ends.back() << " without nesting";
      open_ends.push_back(end);
    }
  }
  // The report accounts for the trace: nothing dropped, every device job matched.
  const nlohmann::json report = read_json(json);
  EXPECT_EQ(report["trace"]["device_events"].get<size_t>(), device_events);
  EXPECT_EQ(report["trace"]["dropped_device_events"], 0);
  EXPECT_EQ(report["trace"]["unmatched_device_jobs"], 0);
  EXPECT_EQ(report["trace"]["device_trace"], "recorded");
}

// Device events of one kind on a chip's track, per job serial.
std::map<uint64_t, size_t> chip_slices_per_job(const nlohmann::json& trace) {
  std::map<uint64_t, size_t> per_job;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "compute") {
      ++per_job[e["args"]["job"].get<uint64_t>() * 8 + e["args"]["chip"].get<uint64_t>()];
    }
  }
  return per_job;
}

bool has_warmup(const nlohmann::json& trace) {
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["args"].value("run", "").rfind("warmup", 0) == 0) return true;
  }
  return false;
}

TEST_F(TraceTest, TraceHasTheNamedTracksAndSaneSpans) {
  const auto [trace, report] = traced("");
  EXPECT_TRUE(has_warmup(trace));  // --warmup 1 by default, and --trace-runs all
  size_t most = 0;
  for (const auto& [job, slices] : chip_slices_per_job(trace)) most = std::max(most, slices);
  EXPECT_GT(most, 1u) << "per-layer segments expected at --trace-level layer";
}

// --trace-level job folds each job's segments into one slice per chip, and --trace-runs
// measured leaves the warm-up out; the trace still nests and accounts for every event.
TEST_F(TraceTest, JobLevelAndMeasuredRunsOnlyStillNest) {
  const auto [layers, layer_report] = traced("");
  const auto [jobs, job_report] = traced("--trace-level job --trace-runs measured");
  EXPECT_FALSE(has_warmup(jobs));
  for (const auto& [job, slices] : chip_slices_per_job(jobs)) {
    EXPECT_EQ(slices, 1u) << "job*8+chip " << job;
  }
  for (const auto& e : jobs["traceEvents"]) {
    EXPECT_FALSE(e.contains("args") && e["args"].contains("layer")) << e.dump();
  }
  EXPECT_LT(job_report["trace"]["device_events"].get<size_t>() * 4,
            layer_report["trace"]["device_events"].get<size_t>());
  EXPECT_EQ(job_report["trace"]["level"], "job");
  EXPECT_EQ(job_report["trace"]["runs"], "measured");
}

// The bench keeps at most --trace-max-events device events and says how many it let go.
TEST_F(BenchTest, TraceMaxEventsBoundsWhatIsKept) {
  const fs::path trace = dir_ / "t.json", json = dir_ / "r.json";
  const CalrtRun run = bench(
      CALRT_TEST_CALBIN, "--prompt-len 64 --gen-len 4 --runs 1 --host-time model --trace " +
                             quoted(trace) + " --json " + quoted(json) + " --trace-max-events 50");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json report = read_json(json);
  EXPECT_EQ(report["trace"]["device_events"], 50);
  EXPECT_GT(report["trace"]["discarded_device_events"].get<uint64_t>(), 0u);
  EXPECT_NE(run.output.find("past --trace-max-events 50"), std::string::npos) << run.output;
}

}  // namespace
