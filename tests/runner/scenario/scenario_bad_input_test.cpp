// Malformed scenario files are bad input: `calrt scenario` exits 2 before anything runs, with a
// message that names the file and the field or value that is wrong (scenarios/README.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/runner/calrt_process.hpp"
#include "tests/runner/scratch_dir_test.hpp"

namespace fs = std::filesystem;

namespace {

// A scenario that is valid in every respect; each test breaks one thing of it.
constexpr const char* kValid = R"(description: A DMA error during the first prefill, recovered.
calbin: tiny
seed: 11
faults:
  - kind: dma_h2d
    during: prefill
    at_op: 1
steps:
  - configure
  - prefill: {seq: a, case: 2}
  - decode: {seq: a, steps: 2}
expect:
  outcome: recovered
  first_error: DMA_ERROR
  fault_class: device
  device_state: CONFIGURED
  recovered_by: job_abort
  resets: 1
  max_call_ms: 5
  sequences: {a: ok}
negative_controls: [no-reset]
)";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) {
    text.replace(at, from.size(), to);
  }
  return text;
}

class ScenarioBadInput : public ScratchDirTest {
 protected:
  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  CalrtRun scenario(const std::string& args) const {
    return run_calrt("scenario " + args + " --calbin-dir " + quoted(CALRT_TEST_CALBIN_DIR) +
                     " --json " + quoted(dir_ / "report.json"));
  }

  // Exit 2, no scenario ran, and the message names the file and every given fragment.
  void expect_rejected(const fs::path& file, const CalrtRun& run,
                       std::initializer_list<std::string> fragments) const {
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_NE(run.output.find(file.string()), std::string::npos)
        << "the message does not name the file:\n"
        << run.output;
    for (const std::string& fragment : fragments) {
      EXPECT_NE(run.output.find(fragment), std::string::npos)
          << "the message does not say '" << fragment << "':\n"
          << run.output;
    }
    EXPECT_EQ(run.output.find("PASS "), std::string::npos) << "a scenario ran:\n" << run.output;
    EXPECT_EQ(run.output.find("FAIL "), std::string::npos) << "a scenario ran:\n" << run.output;
    std::ifstream stream(dir_ / "report.json");
    if (stream) {
      const nlohmann::json report = nlohmann::json::parse(stream);
      EXPECT_EQ(report["result"], "ERROR");
    }
  }
};

// The unbroken file is accepted: the tests below fail for the one thing each breaks.
TEST_F(ScenarioBadInput, TheValidFileRuns) {
  const fs::path file = write("valid.yaml", kValid);
  const CalrtRun run = scenario(quoted(file));
  EXPECT_NE(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("valid"), std::string::npos) << run.output;
}

TEST_F(ScenarioBadInput, UnknownTopLevelKey) {
  const fs::path file = write("unknown-key.yaml", std::string(kValid) + "colour: red\n");
  expect_rejected(file, scenario(quoted(file)), {"colour"});
}

TEST_F(ScenarioBadInput, UnknownKeyInAFault) {
  const fs::path file = write("unknown-fault-key.yaml",
                              replaced(kValid, "    at_op: 1\n", "    at_op: 1\n    when: soon\n"));
  expect_rejected(file, scenario(quoted(file)), {"faults[0]", "when"});
}

TEST_F(ScenarioBadInput, UnknownFaultKind) {
  const fs::path file =
      write("unknown-kind.yaml", replaced(kValid, "kind: dma_h2d", "kind: dma_sideways"));
  expect_rejected(file, scenario(quoted(file)), {"faults[0].kind", "dma_sideways"});
}

TEST_F(ScenarioBadInput, BadOutcomeName) {
  const fs::path file =
      write("bad-outcome.yaml", replaced(kValid, "outcome: recovered", "outcome: fine"));
  expect_rejected(file, scenario(quoted(file)), {"expect.outcome", "fine"});
}

TEST_F(ScenarioBadInput, BadErrorCodeName) {
  const fs::path file =
      write("bad-code.yaml", replaced(kValid, "first_error: DMA_ERROR", "first_error: OOPS"));
  expect_rejected(file, scenario(quoted(file)), {"expect.first_error", "OOPS"});
}

TEST_F(ScenarioBadInput, MissingExpect) {
  const std::string text = kValid;
  const fs::path file = write(
      "no-expect.yaml", text.substr(0, text.find("expect:")) + "negative_controls: [no-reset]\n");
  expect_rejected(file, scenario(quoted(file)), {"expect", "missing"});
}

TEST_F(ScenarioBadInput, CaseBeyondTheGoldenSet) {
  const fs::path file =
      write("case-too-big.yaml", replaced(kValid, "{seq: a, case: 2}", "{seq: a, case: 99}"));
  expect_rejected(file, scenario(quoted(file)), {"case", "99"});
}

TEST_F(ScenarioBadInput, UnknownStepKind) {
  const fs::path file = write(
      "bad-step.yaml", replaced(kValid, "  - configure\n", "  - configure\n  - warp: {seq: a}\n"));
  expect_rejected(file, scenario(quoted(file)), {"steps[1]", "warp"});
}

TEST_F(ScenarioBadInput, UnknownPolicyBug) {
  const fs::path file = write("bad-bug.yaml", replaced(kValid, "negative_controls: [no-reset]",
                                                       "negative_controls: [no-brakes]"));
  expect_rejected(file, scenario(quoted(file)), {"negative_controls[0]", "no-brakes"});
}

TEST_F(ScenarioBadInput, TwoTriggersInOneFault) {
  const fs::path file = write("two-triggers.yaml",
                              replaced(kValid, "    at_op: 1\n", "    at_op: 1\n    at_job: 2\n"));
  expect_rejected(file, scenario(quoted(file)), {"faults[0]", "trigger"});
}

TEST_F(ScenarioBadInput, UnknownSweepKind) {
  std::string text = kValid;
  text = text.substr(0, text.find("faults:")) +
         "sweep:\n  kinds: [dma_sideways]\nsteps:\n  - configure\n";
  const fs::path file = write("bad-sweep.yaml", text);
  expect_rejected(file, scenario(quoted(file)), {"sweep.kinds[0]", "dma_sideways"});
}

TEST_F(ScenarioBadInput, NotYamlAtAll) {
  const fs::path file = write("not-yaml.yaml", "{{{ this: [is not\n\tyaml: \"at all\n");
  expect_rejected(file, scenario(quoted(file)), {});
}

TEST_F(ScenarioBadInput, NotAMapOfFields) {
  const fs::path file = write("a-list.yaml", "- configure\n- prefill\n");
  expect_rejected(file, scenario(quoted(file)), {});
}

TEST_F(ScenarioBadInput, MissingFile) {
  const fs::path file = dir_ / "no-such-scenario.yaml";
  expect_rejected(file, scenario(quoted(file)), {});
}

// One bad file among good ones: nothing runs at all.
TEST_F(ScenarioBadInput, OneBadFileStopsTheWholeRun) {
  const fs::path good = write("good.yaml", kValid);
  const fs::path bad =
      write("bad.yaml", replaced(kValid, "outcome: recovered", "outcome: sideways"));
  expect_rejected(bad, scenario(quoted(good) + " " + quoted(bad)), {"expect.outcome", "sideways"});
}

}  // namespace
