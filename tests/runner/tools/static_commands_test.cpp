// check, inspect and plan through the `calrt` executable. Expected figures are computed here
// from the reference model's published dimensions and the bring-up guide's formulas, never
// copied from the program's output.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/runner/calrt_process.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kTiny = CALRT_TEST_CALBIN;
const fs::path kReference = CALRT_TEST_REFERENCE_CALBIN;
const fs::path kTinyService = CALRT_TEST_SERVICE_MANIFEST;

// Qwen3-30B-A3B as published: 48 layers, 4 KV heads of 128, vocab 151936, context 40960,
// batch 1, BF16 K and V, two chips.
constexpr uint64_t kLayers = 48, kKvHeads = 4, kHeadDim = 128, kContext = 40960, kBatch = 1;
constexpr uint64_t kBf16Bytes = 2, kVocab = 151936, kChips = 2;
constexpr uint64_t kKvTotal = kLayers * kKvHeads * 2 * kHeadDim * kContext * kBatch * kBf16Bytes;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

class StaticCommands : public ::testing::Test {
 protected:
  fs::path json_path(const std::string& name) {
    return fs::temp_directory_path() /
           ("calrt_static_" + std::to_string(::getpid()) + "_" + name + ".json");
  }
  json read(const fs::path& path) {
    std::ifstream in(path);
    json doc = json::parse(in);
    fs::remove(path);
    return doc;
  }
};

TEST_F(StaticCommands, CheckPassesTheTinyCalbinWithItsServiceManifest) {
  const fs::path report = json_path("check_tiny");
  const CalrtRun run = run_calrt("check " + quoted(kTiny) + " --manifest " + quoted(kTinyService) +
                                 " --json " + quoted(report));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json doc = read(report);
  EXPECT_EQ(doc["result"], "PASS");
  for (const json& c : doc["checks"]) {
    EXPECT_EQ(c["status"], "PASS") << c.dump();
  }
}

TEST_F(StaticCommands, CheckPassesTheReferenceCalbin) {
  const CalrtRun run = run_calrt("check " + quoted(kReference));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("check PASS"), std::string::npos) << run.output;
}

TEST_F(StaticCommands, CheckNamesTheFailedCheckAndExitsOne) {
  const fs::path dir =
      fs::temp_directory_path() / ("calrt_static_mb_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(kTiny, dir, fs::copy_options::recursive);
  json manifest;
  {
    std::ifstream in(dir / "manifest.json");
    manifest = json::parse(in);
  }
  manifest["device_memory_required"] = {{"value", 16777216}, {"unit", "MB"}};
  std::ofstream(dir / "manifest.json") << manifest.dump(2);
  const fs::path report = json_path("check_mb");
  const CalrtRun run = run_calrt("check " + quoted(dir) + " --json " + quoted(report));
  fs::remove_all(dir);
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("[FAIL] memory.unit"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("16777216"), std::string::npos) << run.output;
  EXPECT_EQ(read(report)["failed_ids"], json::array({"memory.unit"}));
}

// Each defect through the command a user runs: the check that fails, and the field and value
// its message names.
TEST_F(StaticCommands, CheckNamesTheFieldAndValueOfEachDefect) {
  struct Case {
    const char* name;
    std::function<void(json&, std::string&)> damage;  // the manifest, the service manifest
    std::string check;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {"device_memory_0",
       [](json& m, std::string&) {
         m["device_memory_required"] = {{"value", 0}, {"unit", "MiB"}};
       },
       "memory.capacity",
       {"device_memory_required 0 MiB", "own plan"}},
      {"device_memory_1_KiB",
       [](json& m, std::string&) {
         m["device_memory_required"] = {{"value", 1}, {"unit", "KiB"}};
       },
       "memory.capacity",
       {"device_memory_required 1 KiB", "own plan"}},
      {"device_memory_64_GiB",
       [](json& m, std::string&) {
         m["device_memory_required"] = {{"value", 64}, {"unit", "GiB"}};
       },
       "memory.capacity",
       {"device_memory_required 64 GiB", "usable 17179869184"}},
      {"layers_0",
       [](json& m, std::string&) { m["llm"]["layers"] = 0; },
       "manifest.parse",
       {"llm.layers", "0"}},
      {"functional_without_weights",
       [](json& m, std::string&) { m["weights"] = json::array(); },
       "params.in_file",
       {"weights", "timing_only"}},
      {"csr_element_past_the_batch",
       [](json&, std::string& service) {
         service.replace(service.find("current: cur_seq_len[0]"), 23, "current: cur_seq_len[7]");
       },
       "service.tensors",
       {"csr.current", "cur_seq_len[7]", "batch of 1"}},
      {"service_key_given_twice",
       [](json&, std::string& service) {
         service.replace(service.find("vocab: 1000"), 11, "vocab: 1000\nvocab: 1000");
       },
       "service.parse",
       {"vocab", "twice"}},
  };
  for (const Case& c : cases) {
    const fs::path dir = fs::temp_directory_path() /
                         ("calrt_static_" + std::string(c.name) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::copy(kTiny, dir, fs::copy_options::recursive);
    json manifest;
    {
      std::ifstream in(dir / "manifest.json");
      manifest = json::parse(in);
    }
    std::string service;
    {
      std::ifstream in(kTinyService);
      service.assign(std::istreambuf_iterator<char>(in), {});
    }
    c.damage(manifest, service);
    std::ofstream(dir / "manifest.json") << manifest.dump(2);
    std::ofstream(dir / "service.yaml") << service;
    const fs::path report = json_path(std::string("check_") + c.name);
    const CalrtRun run = run_calrt("check " + quoted(dir) + " --manifest " +
                                   quoted(dir / "service.yaml") + " --json " + quoted(report));
    fs::remove_all(dir);
    EXPECT_EQ(run.exit_code, 1) << c.name << "\n" << run.output;
    EXPECT_NE(run.output.find("[FAIL] " + c.check), std::string::npos) << c.name << "\n"
                                                                       << run.output;
    for (const std::string& word : c.mentions) {
      EXPECT_NE(run.output.find(word), std::string::npos) << c.name << ": '" << word << "' not in\n"
                                                          << run.output;
    }
    EXPECT_EQ(read(report)["failed_ids"], json::array({c.check})) << c.name;
  }
}

// A missing calbin is bad input (exit 2), as in inspect and smoke; a directory without a
// manifest that parses is a failed check (exit 1).
TEST_F(StaticCommands, CheckOfAMissingDirectoryIsBadInput) {
  const CalrtRun run = run_calrt("check /nonexistent/calbin");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("/nonexistent/calbin: not a calbin directory"), std::string::npos)
      << run.output;
  const fs::path empty =
      fs::temp_directory_path() / ("calrt_static_empty_" + std::to_string(::getpid()));
  fs::create_directories(empty);
  const CalrtRun unparsed = run_calrt("check " + quoted(empty));
  fs::remove_all(empty);
  EXPECT_EQ(unparsed.exit_code, 1) << unparsed.output;
  EXPECT_NE(unparsed.output.find("[FAIL] manifest.parse"), std::string::npos) << unparsed.output;
}

// A --manifest file that is not there is bad input (exit 2), as a missing calbin is; one that
// is there but does not parse is the failed check service.parse (exit 1).
TEST_F(StaticCommands, CheckOfAMissingServiceManifestIsBadInput) {
  const CalrtRun run = run_calrt("check " + quoted(kTiny) + " --manifest /nonexistent/svc.yaml");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--manifest '/nonexistent/svc.yaml': no such file"), std::string::npos)
      << run.output;
  const fs::path garbled =
      fs::temp_directory_path() / ("calrt_static_svc_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(garbled) << "service: [unclosed\n";
  const CalrtRun unparsed = run_calrt("check " + quoted(kTiny) + " --manifest " + quoted(garbled));
  fs::remove(garbled);
  EXPECT_EQ(unparsed.exit_code, 1) << unparsed.output;
  EXPECT_NE(unparsed.output.find("[FAIL]"), std::string::npos) << unparsed.output;
}

TEST_F(StaticCommands, PlanReproducesTheReferenceKvFigures) {
  const fs::path report = json_path("plan_ref");
  const CalrtRun run = run_calrt("plan " + quoted(kReference) + " --json " + quoted(report));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json doc = read(report);
  EXPECT_EQ(doc["kv"]["total_bytes"].get<uint64_t>(), kKvTotal);
  EXPECT_EQ(doc["kv"]["per_chip_bytes"].get<uint64_t>(), kKvTotal / kChips);
  EXPECT_DOUBLE_EQ(doc["kv"]["total_gib"].get<double>(), 3.75);
  EXPECT_DOUBLE_EQ(doc["kv"]["per_chip_gib"].get<double>(), 1.875);
  // An S8 V-cache keeps K at 2 bytes and halves V only, adding a 4-byte scale per head and
  // position: 48 layers * 4 heads * 40960 positions * (128 * 3 + 4) bytes.
  EXPECT_EQ(doc["s8_v_cache"]["total_bytes"].get<uint64_t>(), uint64_t{48} * 4 * 40960 * 388);
  EXPECT_TRUE(doc["fits"].get<bool>());
  EXPECT_NE(run.output.find("3.750 GiB"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("1.875 GiB"), std::string::npos) << run.output;
}

TEST_F(StaticCommands, PlanFromFlagsAgreesWithTheFormula) {
  const fs::path report = json_path("plan_flags");
  const CalrtRun run = run_calrt(
      "plan --layers 48 --kv-heads 4 --head-dim 128 --context 40960 --batch 1 "
      "--chips 2 --params-gib 8 --usable-gib 16 --json " +
      quoted(report));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json doc = read(report);
  EXPECT_EQ(doc["kv"]["total_bytes"].get<uint64_t>(), kKvTotal);
  // 16 GiB - 8 GiB params leaves 8 GiB for KV at 48 * 2 * 128 * 4 bytes per position.
  const uint64_t per_position = kLayers * (kKvHeads / kChips) * kHeadDim * 2 * kBf16Bytes;
  EXPECT_EQ(doc["max_context"].get<uint64_t>(), (uint64_t{8} << 30) / per_position);
  const int64_t headroom = doc["chips"][0]["headroom"].get<int64_t>();
  EXPECT_EQ(headroom, static_cast<int64_t>((uint64_t{8} << 30) - kKvTotal / kChips));
}

// From flags without --params-gib the weights count 0: the plan says so; with it, it does not.
TEST_F(StaticCommands, PlanFromFlagsSaysWhenTheWeightsAreNotCounted) {
  const std::string geometry =
      "plan --layers 48 --kv-heads 4 --head-dim 128 --context 40960 --chips 2";
  const CalrtRun bare = run_calrt(geometry);
  EXPECT_EQ(bare.exit_code, 0) << bare.output;
  EXPECT_NE(bare.output.find("the weights are not counted"), std::string::npos) << bare.output;
  const CalrtRun counted = run_calrt(geometry + " --params-gib 8");
  EXPECT_EQ(counted.output.find("not counted"), std::string::npos) << counted.output;
}

TEST_F(StaticCommands, PlanSaysWhenItDoesNotFit) {
  const CalrtRun run = run_calrt("plan " + quoted(kReference) + " --usable-gib 8");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("DOES NOT FIT"), std::string::npos) << run.output;
}

TEST_F(StaticCommands, PlanWithoutCalbinNeedsTheGeometry) {
  const CalrtRun run = run_calrt("plan --layers 48");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--kv-heads"), std::string::npos) << run.output;
}

// A zero anywhere in the geometry needs no KV bytes and "fits" on any card; a 2^32 context
// wrapped to zero in the manifest's 32-bit field. Both are usage errors naming the flag.
TEST_F(StaticCommands, PlanRefusesZeroAndWrappingGeometry) {
  const std::string shape = "plan --layers 48 --kv-heads 4 --head-dim 128 --context 40960";
  struct Case {
    std::string args;
    std::string flag;
    std::string value;
  };
  for (const Case& c : std::vector<Case>{
           {"plan --layers 0 --kv-heads 4 --head-dim 128 --context 40960", "--layers", "0"},
           {"plan --layers 48 --kv-heads 4 --head-dim 128 --context 0", "--context", "0"},
           {"plan --layers 48 --kv-heads 4 --head-dim 128 --context 4294967296", "--context",
            "4294967296"},
           {shape + " --batch 0", "--batch", "0"},
           {shape + " --chips 0", "--chips", "0"},
           {shape + " --chips 9", "--chips", "9"},
           {"plan " + quoted(kReference) + " --kv-heads 0", "--kv-heads", "0"}}) {
    const CalrtRun run = run_calrt(c.args);
    EXPECT_EQ(run.exit_code, 2) << c.args << "\n" << run.output;
    EXPECT_NE(run.output.find(c.flag), std::string::npos) << c.args << "\n" << run.output;
    EXPECT_NE(run.output.find(c.value), std::string::npos) << c.args << "\n" << run.output;
  }
  // The largest 32-bit context is still a plan (it does not fit, which is a verdict, not bad
  // input).
  const CalrtRun edge = run_calrt("plan --layers 1 --kv-heads 1 --head-dim 1 --context 4294967295");
  EXPECT_NE(edge.exit_code, 2) << edge.output;
}

TEST_F(StaticCommands, VersionAndAnUnknownCommand) {
  const CalrtRun version = run_calrt("--version");
  EXPECT_EQ(version.exit_code, 0) << version.output;
  EXPECT_EQ(version.output.rfind("calrt ", 0), 0u) << version.output;
  EXPECT_NE(version.output.find("runtime ABI 0."), std::string::npos) << version.output;
  EXPECT_NE(version.output.find("commit "), std::string::npos) << version.output;
  const CalrtRun bogus = run_calrt("bogus");
  EXPECT_EQ(bogus.exit_code, 2) << bogus.output;
  EXPECT_NE(bogus.output.find("unknown command 'bogus'"), std::string::npos) << bogus.output;
  EXPECT_NE(bogus.output.find("smoke"), std::string::npos) << bogus.output;
}

// A mistyped option names the subcommand and the option that was probably meant.
TEST_F(StaticCommands, AMistypedOptionNamesTheSubcommandAndTheNearestOption) {
  const CalrtRun run = run_calrt("smoke " + quoted(kTiny) + " --case all");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("calrt smoke: "), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("did you mean --cases?"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("see calrt smoke --help"), std::string::npos) << run.output;
  const CalrtRun far = run_calrt("plan --zzzzzz 3");
  EXPECT_EQ(far.exit_code, 2) << far.output;
  EXPECT_NE(far.output.find("calrt plan: "), std::string::npos) << far.output;
  EXPECT_EQ(far.output.find("did you mean"), std::string::npos) << far.output;
  const CalrtRun help = run_calrt("plan --help");
  EXPECT_EQ(help.exit_code, 0) << help.output;
}

TEST_F(StaticCommands, PlanRejectsAnUnknownDtype) {
  const CalrtRun run = run_calrt("plan " + quoted(kReference) + " --v-dtype fp3");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("fp3"), std::string::npos) << run.output;
}

TEST_F(StaticCommands, InspectShowsTheReferenceInventoryAndLogitsRow) {
  const fs::path report = json_path("inspect_ref");
  const CalrtRun run = run_calrt("inspect " + quoted(kReference) + " --json " + quoted(report));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json doc = read(report);
  ASSERT_EQ(doc["models"].size(), 2u);
  for (const json& model : doc["models"]) {
    SCOPED_TRACE(model["name"].get<std::string>());
    const json& ops = model["ops"];
    EXPECT_EQ(ops["flash_attention"]["count_per_chip"].get<uint64_t>(), kLayers);
    EXPECT_EQ(ops["moe_grouped_dense"]["count_per_chip"].get<uint64_t>(), 3 * kLayers);
    EXPECT_EQ(ops["fused_rmsnorm"]["count_per_chip"].get<uint64_t>(), 4 * kLayers + 1);
    EXPECT_EQ(ops["quant_matmul_add"]["count_per_chip"].get<uint64_t>(), 4 * kLayers + 1);
    const json& logits = model["outputs"][0];
    EXPECT_EQ(logits["shape"], json::array({1, kVocab}));
    EXPECT_EQ(logits["bytes"].get<uint64_t>(), kVocab * kBf16Bytes);  // 303872
  }
  EXPECT_EQ(doc["memory_map"][0]["kv_cache"].get<uint64_t>(), kKvTotal / kChips);
}

TEST_F(StaticCommands, InspectOfAMissingCalbinIsBadInput) {
  const CalrtRun run = run_calrt("inspect /nonexistent/calbin");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("/nonexistent/calbin"), std::string::npos) << run.output;
}

// A report never replaces the calbin it describes, and "-" is standard output.
TEST_F(StaticCommands, ReportPathsInsideTheCalbinAreRefusedAndDashIsStdout) {
  const std::string manifest_before = [] {
    std::ifstream in(kTiny / "manifest.json");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  for (const std::string command : {"check", "inspect", "plan"}) {
    const CalrtRun run =
        run_calrt(command + " " + quoted(kTiny) + " --json " + quoted(kTiny / "manifest.json"));
    EXPECT_EQ(run.exit_code, 2) << command << ": " << run.output;
    EXPECT_NE(run.output.find("inside the calbin"), std::string::npos) << run.output;
  }
  std::ifstream in(kTiny / "manifest.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), manifest_before);

  const CalrtRun plan = run_calrt("plan " + quoted(kTiny) + " --json -");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const size_t brace = plan.output.find("\n{");
  ASSERT_NE(brace, std::string::npos) << plan.output;
  EXPECT_EQ(json::parse(plan.output.substr(brace + 1))["command"], "plan");
  EXPECT_FALSE(fs::exists("-"));
}

// An empty report path is a usage error naming the option; it used to mean "no report" and
// the run went ahead with nothing written.
TEST_F(StaticCommands, EmptyReportPathsAreUsageErrors) {
  const std::string tiny = quoted(kTiny);
  for (const std::string& args :
       std::vector<std::string>{"check " + tiny + " --json ''", "inspect " + tiny + " --json ''",
                                "plan " + tiny + " --json ''", "info --json ''",
                                "smoke " + tiny + " --json ''", "bench " + tiny + " --csv ''",
                                "bench " + tiny + " --trace ''", "conformance --junit ''"}) {
    const CalrtRun run = run_calrt(args);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.output;
    EXPECT_NE(run.output.find("empty path"), std::string::npos) << args << "\n" << run.output;
  }
}

// Numbers that a double->uint64 cast would turn into a wrong verdict are refused as usage
// errors: NaN, infinities, negatives and sizes beyond any device.
TEST_F(StaticCommands, NonFiniteAndOutOfRangeNumbersAreUsageErrors) {
  const std::string tiny = quoted(kTiny);
  for (const std::string& args : std::vector<std::string>{
           "check " + tiny + " --usable-gib 1e300", "check " + tiny + " --usable-gib nan",
           "inspect " + tiny + " --usable-gib inf",
           std::string("plan --layers 48 --kv-heads 4 --head-dim 128 --context 40960 --params-gib "
                       "17179869184"),
           std::string(
               "plan --layers 48 --kv-heads 4 --head-dim 128 --context 40960 --params-gib -5"),
           "smoke " + tiny + " --min-cosine nan", "smoke " + tiny + " --max-abs-error -1",
           "smoke " + tiny + " --max-contract-ulps -1",
           "smoke " + tiny + " --max-contract-mean-ulps nan"}) {
    const CalrtRun run = run_calrt(args);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.output;
  }
}

}  // namespace
