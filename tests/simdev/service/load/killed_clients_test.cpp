// Clients killed mid-job while others run golden cases: the others must all pass, and
// afterwards the daemon must hold nothing of the killed sessions (KV handles, DRAM of their
// calbins and KV, their sockets).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <spdlog/fmt/fmt.h>

#include <memory>
#include <thread>
#include <vector>

#include "daemon_process.hpp"
#include "load_support.hpp"

namespace calrt_load {
namespace {

using namespace std::chrono_literals;

constexpr int kKilledClients = 3;
const std::vector<std::string> kGoldenCases = {"len257", "len256", "len17", "len1"};

// DRAM in use per chip.
std::vector<uint64_t> dram_used(const calrt::Device& device) {
  std::vector<uint64_t> used;
  const uint32_t chips = device.status().chip_count;
  for (uint32_t c = 0; c < chips; ++c) used.push_back(device.chip_status(c).dram_used_bytes);
  return used;
}

TEST(KilledClients, OthersPassAndTheDaemonReleasesEverything) {
  const GoldenInputs& golden = golden_inputs();
  ScratchDir dir;
  // Paced: a job takes wall time on the device, so a kill can land while one is in flight.
  calrt_test::DaemonOptions options;
  options.extra_args = {"--device-config", "clock=paced"};
  calrt_test::DaemonProcess daemon(dir.path(), options);
  const calrt::Api api = client_api(daemon.endpoint());
  const calrt::Timeout timeout = 30s;

  // The observer keeps the shared device alive from start to end, so that the final checks
  // see the device the killed clients used, not a fresh one.
  calrt::Device observer = calrt::Device::create(api, calrt::DeviceKind::sim, 0, {}, timeout);
  const std::vector<uint64_t> empty = dram_used(observer);
  const size_t idle_fds = daemon.open_fds();

  // What one configured calbin occupies, measured before any client is killed.
  std::vector<uint64_t> one_calbin;
  {
    calrt::Calbin calbin = calrt::Calbin::create(observer, CALRT_TEST_CALBIN, timeout);
    const calrt::ConfigureResult configured = calbin.configure(timeout);
    one_calbin = dram_used(observer);
    ASSERT_EQ(one_calbin.size(), configured.memory_used_bytes.size());
    for (size_t c = 0; c < one_calbin.size(); ++c) {
      EXPECT_EQ(one_calbin[c] - empty[c], configured.memory_used_bytes[c]) << "chip " << c;
    }
  }
  ASSERT_TRUE(eventually([&] { return dram_used(observer) == empty; }, 5s));

  std::vector<std::unique_ptr<ChildProcess>> killed;
  for (int i = 0; i < kKilledClients; ++i) {
    killed.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{SERVICE_LOAD_CLIENT, daemon.endpoint(), CALRT_TEST_CALBIN}));
  }
  for (auto& child : killed) {
    ASSERT_TRUE(child->wait_for_output("inflight 2", 30s))
        << "the load client did not start prefilling:\n"
        << child->output() << "\ndaemon output:\n"
        << daemon.output();
  }

  std::vector<ClientOutcome> outcomes(kGoldenCases.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < kGoldenCases.size(); ++i) {
    threads.emplace_back([&, i] {
      outcomes[i] = run_golden_client(api, golden, golden.case_index(kGoldenCases[i]));
    });
  }
  // Kill one client at a time while the golden clients run; each is in its submit/wait
  // loop, so a job of its session is queued or on the device.
  for (size_t i = 0; i < killed.size(); ++i) {
    std::this_thread::sleep_for(30ms * static_cast<int>(i + 1));
    ASSERT_FALSE(killed[i]->wait_exit(0ms)) << "load client exited early:\n" << killed[i]->output();
    ::kill(killed[i]->pid(), SIGKILL);
    const auto status = killed[i]->wait_exit(10s);
    ASSERT_TRUE(status && WIFSIGNALED(*status)) << killed[i]->output();
  }
  for (auto& thread : threads) thread.join();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_TRUE(outcomes[i].passed())
        << "golden client " << i << " (" << outcomes[i].case_name
        << "): " << fmt::format("{}", fmt::join(outcomes[i].failures, "\n  "));
  }

  // Disconnect cleanup is asynchronous: give it a bounded moment.
  EXPECT_TRUE(eventually([&] { return dram_used(observer) == empty; }, 5s))
      << "DRAM still in use after every client left: "
      << fmt::format("{}", fmt::join(dram_used(observer), ", "));
  {
    calrt::Device fresh = calrt::Device::create(api, calrt::DeviceKind::sim, 0, {}, timeout);
    calrt::Calbin calbin = calrt::Calbin::create(fresh, CALRT_TEST_CALBIN, timeout);
    calbin.configure(timeout);
    EXPECT_EQ(calbin.kv_capacity().live_handles, 0u);
    EXPECT_EQ(dram_used(fresh), one_calbin) << "DRAM beyond one configured calbin";
  }
  size_t fds = 0;
  EXPECT_TRUE(eventually(
      [&] {
        fds = daemon.open_fds();
        return fds == idle_fds;
      },
      5s))
      << "daemon fds " << fds << ", idle " << idle_fds;
  std::printf(
      "killed %d clients in flight; %zu golden clients passed; daemon fds idle %zu, after %zu\n",
      kKilledClients, outcomes.size(), idle_fds, fds);
}

}  // namespace
}  // namespace calrt_load
