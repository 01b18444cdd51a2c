// Many clients at once on one daemon: each its own thread, device handle (so connection),
// calbin handle, buffers and KV, each on a golden case of another prompt length. Every
// output is compared with the generator's FP32 golden data by the runner's own code; a
// client whose outputs mixed with another's (crosstalk) fails its comparison.
#include <gtest/gtest.h>

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <latch>
#include <thread>
#include <vector>

#include "daemon_process.hpp"
#include "load_support.hpp"

namespace calrt_load {
namespace {

// The long prompts (two chunks for 257) first, so that even two clients mix a chunked and a
// single-chunk prefill, then the short ones.
const std::vector<std::string> kCaseOrder = {"len257", "len255", "len256", "len1",
                                             "len17",  "len2",   "len16",  "len15"};

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

class ConcurrentClients : public testing::TestWithParam<int> {};

TEST_P(ConcurrentClients, EveryClientMatchesGolden) {
  const int clients = GetParam();
  const GoldenInputs& golden = golden_inputs();
  ScratchDir dir;
  calrt_test::DaemonOptions options;
  options.extra_args = {"--max-clients", "32"};
  calrt_test::DaemonProcess daemon(dir.path(), options);
  const calrt::Api api = client_api(daemon.endpoint());

  std::vector<ClientOutcome> outcomes(static_cast<size_t>(clients));
  std::latch start(clients + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    const size_t index = golden.case_index(kCaseOrder[static_cast<size_t>(i) % kCaseOrder.size()]);
    threads.emplace_back([&, i, index] {
      start.arrive_and_wait();
      outcomes[static_cast<size_t>(i)] = run_golden_client(api, golden, index);
    });
  }
  const Clock::time_point t0 = Clock::now();
  start.arrive_and_wait();
  for (auto& thread : threads) thread.join();

  std::vector<double> finish_ms;
  for (int i = 0; i < clients; ++i) {
    const ClientOutcome& o = outcomes[static_cast<size_t>(i)];
    finish_ms.push_back(ms_between(t0, o.finished));
    EXPECT_TRUE(o.passed()) << "client " << i << " (" << o.case_name
                            << "): " << fmt::format("{}", fmt::join(o.failures, "\n  "))
                            << "\ndaemon output:\n"
                            << daemon.output();
    std::printf("client %2d %-7s %3u submissions, done at %8.1f ms\n", i, o.case_name.c_str(),
                o.submissions, finish_ms.back());
  }
  std::sort(finish_ms.begin(), finish_ms.end());
  const double spread = finish_ms.back() - finish_ms.front();
  const double median = finish_ms[finish_ms.size() / 2];
  std::printf(
      "fairness: %d clients, completion min %.1f ms, median %.1f ms, max %.1f ms, "
      "spread %.1f ms\n",
      clients, finish_ms.front(), median, finish_ms.back(), spread);
  RecordProperty("completion_spread_ms", static_cast<int>(spread));
  RecordProperty("completion_max_ms", static_cast<int>(finish_ms.back()));
}

INSTANTIATE_TEST_SUITE_P(Clients, ConcurrentClients, testing::Values(1, 2, 4, 8, 16),
                         [](const testing::TestParamInfo<int>& param_info) {
                           return std::to_string(param_info.param);
                         });

}  // namespace
}  // namespace calrt_load
