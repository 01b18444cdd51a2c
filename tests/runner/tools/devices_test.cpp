// `calrt devices`: the list is probed, so it is tested against runtimes whose cards are known:
// the simulator (no PCIe card, one simulated device) and a test runtime with three PCIe
// cards, the second dead (card_rack_runtime.cpp). A dead card fails the listing; the probe
// stops at NOT_FOUND or at --max-index.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/runner/calrt_process.hpp"
#include "tests/runner/scratch_dir_test.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

class Devices : public ScratchDirTest {
 protected:
  json run_devices(const std::string& args, int exit_code) {
    const fs::path report = dir_ / "devices.json";
    last_ = run_calrt("devices " + args + " --json " + quoted(report));
    EXPECT_EQ(last_.exit_code, exit_code) << args << "\n" << last_.output;
    std::ifstream stream(report);
    return stream ? json::parse(stream) : json::object();
  }
  CalrtRun last_;
};

TEST_F(Devices, TheSimulatorHasOneDeviceAndNoCard) {
  const json doc = run_devices("--device " + quoted(CALRT_SIM_SO), 0);
  ASSERT_EQ(doc.at("devices").size(), 1u) << doc.dump(1);
  const json& sim = doc["devices"][0];
  EXPECT_EQ(sim.at("kind"), "sim");
  EXPECT_EQ(sim.at("chip_count"), 2);
  EXPECT_GT(sim.at("dram_total_bytes").get<uint64_t>(), 0u);
  EXPECT_EQ(doc["probes"][0].at("kind"), "pcie");
  EXPECT_EQ(doc["probes"][0].at("found"), 0);
  EXPECT_NE(doc["probes"][0].at("stopped").get<std::string>().find("index 0: NOT_FOUND"),
            std::string::npos);
  EXPECT_EQ(doc.at("result"), "PASS");
  EXPECT_NE(last_.output.find("calculet-sim"), std::string::npos) << last_.output;
}

TEST_F(Devices, EveryCardIsListedAndADeadOneFailsTheList) {
  const json doc = run_devices("--device " + quoted(CALRT_RACK_SO), 1);
  ASSERT_EQ(doc.at("devices").size(), 4u) << doc.dump(1);
  for (const int index : {0, 1, 2}) {
    EXPECT_EQ(doc["devices"][index].at("kind"), "pcie");
    EXPECT_EQ(doc["devices"][index].at("index"), index);
  }
  EXPECT_TRUE(doc["devices"][0].contains("state"));
  EXPECT_NE(doc["devices"][1].value("error", "").find("DEVICE_LOST"), std::string::npos);
  EXPECT_TRUE(doc["devices"][2].contains("state"));
  EXPECT_EQ(doc["devices"][3].at("kind"), "sim");
  EXPECT_NE(doc["probes"][0].at("stopped").get<std::string>().find("index 3: NOT_FOUND"),
            std::string::npos);
  EXPECT_EQ(doc.at("result"), "FAIL");
  EXPECT_EQ(doc["counts"].at("passed"), 3);
  EXPECT_EQ(doc["counts"].at("failed"), 1);
  EXPECT_NE(last_.output.find("FAIL: Device_Create: DEVICE_LOST"), std::string::npos)
      << last_.output;
}

TEST_F(Devices, ProbingStopsAtMaxIndex) {
  const json doc = run_devices("--device " + quoted(CALRT_RACK_SO) + " --max-index 1", 0);
  ASSERT_EQ(doc.at("devices").size(), 2u) << doc.dump(1);
  EXPECT_EQ(doc["probes"][0].at("stopped"), "--max-index 1 reached");
}

TEST_F(Devices, BadInputExitsTwo) {
  for (const std::string& args :
       {std::string("--device ") + quoted(dir_ / "missing.so"), std::string("--max-index 0")}) {
    const CalrtRun run = run_calrt("devices " + args);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.output;
  }
  const CalrtRun run = run_calrt("devices --json " + quoted(dir_ / "no" / "d.json"));
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--json"), std::string::npos) << run.output;
}

}  // namespace
