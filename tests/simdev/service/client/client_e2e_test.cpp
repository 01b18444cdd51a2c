// End to end: the `calrt` executable over `simdev serve`, exactly as a user runs it: smoke
// over unix: and tcp:, and the conformance suite with the same verdicts as in process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "daemon_process.hpp"
#include "tests/runner/calrt_process.hpp"

namespace fs = std::filesystem;

namespace {

class ServiceE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("calrt_service_e2e_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::map<std::string, std::string> verdicts(const fs::path& report) {
  std::ifstream stream(report);
  const nlohmann::json doc = nlohmann::json::parse(stream);
  std::map<std::string, std::string> out;
  for (const auto& clause : doc["clauses"]) {
    out[clause["id"].get<std::string>()] = clause["verdict"].get<std::string>();
  }
  return out;
}

TEST_F(ServiceE2eTest, SmokeOverUnixSocket) {
  calrt_test::DaemonProcess daemon(dir_ / "d");
  const CalrtRun run = run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --device " +
                                 quoted(fs::path(daemon.endpoint())));
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

TEST_F(ServiceE2eTest, SmokeOverTcp) {
  calrt_test::DaemonOptions options;
  options.extra_args = {"--tcp", "0"};
  calrt_test::DaemonProcess daemon(dir_ / "d", options);
  ASSERT_FALSE(daemon.tcp_endpoint().empty()) << daemon.output();
  const CalrtRun run = run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --device " +
                                 quoted(fs::path(daemon.tcp_endpoint())));
  EXPECT_EQ(run.exit_code, 0) << run.output;
}

// A batch-4 calbin over the socket: Kv_Apply's row (protocol 3) reaches the daemon's device,
// so smoke step 10 decodes four sequences at once there as it does in process.
TEST_F(ServiceE2eTest, BatchSmokeOverUnixSocket) {
  const fs::path calbin = dir_ / "batch4";
  const CalrtRun gen = run_command(std::string("'") + SIMDEV_EXE + "' gen --config " +
                                   quoted(fs::path(CALRT_GEN_CONFIGS) / "qwen3-small-batch4.yaml") +
                                   " --no-long --out " + quoted(calbin));
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  calrt_test::DaemonProcess daemon(dir_ / "d");
  const CalrtRun run =
      run_calrt("smoke " + quoted(calbin) + " --device " + quoted(fs::path(daemon.endpoint())));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[PASS] 10 batch"), std::string::npos) << run.output;
}

// The loader path: libcalrt_client.so by path, the endpoint from CALRT_SERVICE.
TEST_F(ServiceE2eTest, SmokeThroughTheSharedLibrary) {
  calrt_test::DaemonProcess daemon(dir_ / "d");
  const CalrtRun run =
      run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --device " + quoted(CALRT_CLIENT_SO) +
                " --device-config " + quoted(fs::path("service.endpoint=" + daemon.endpoint())));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  ::setenv("CALRT_SERVICE", daemon.endpoint().c_str(), 1);
  const CalrtRun from_env =
      run_calrt("smoke " + quoted(CALRT_TEST_CALBIN) + " --device " + quoted(CALRT_CLIENT_SO));
  ::unsetenv("CALRT_SERVICE");
  EXPECT_EQ(from_env.exit_code, 0) << from_env.output;
}

TEST_F(ServiceE2eTest, ConformanceMatchesInProcess) {
  if (!CALRT_TEST_IN_PROCESS) {
    GTEST_SKIP() << "calrt was built without the in-process simulator";
  }
  calrt_test::DaemonProcess daemon(dir_ / "d");
  const fs::path local = dir_ / "sim.json";
  const fs::path remote = dir_ / "service.json";
  const CalrtRun sim = run_calrt("conformance --device sim --calbin " + quoted(CALRT_TEST_CALBIN) +
                                 " --json " + quoted(local));
  ASSERT_EQ(sim.exit_code, 0) << sim.output;
  const CalrtRun service =
      run_calrt("conformance --device " + quoted(fs::path(daemon.endpoint())) + " --calbin " +
                quoted(CALRT_TEST_CALBIN) + " --json " + quoted(remote));
  EXPECT_EQ(service.exit_code, 0) << service.output << "\ndaemon:\n" << daemon.output();
  const auto expected = verdicts(local);
  const auto got = verdicts(remote);
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [id, verdict] : expected) {
    auto it = got.find(id);
    ASSERT_NE(it, got.end()) << id;
    EXPECT_EQ(it->second, verdict) << id << " over the service\n" << service.output;
  }
}

}  // namespace
