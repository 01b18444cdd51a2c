// Repeated connect / load / configure / run / unload cycles against one daemon: its open
// file descriptors and resident memory must not grow. The first kWarmupCycles are not
// counted (allocator pools, lazily created state); the figures after them are compared with
// those at the end. CALRT_LOAD_SOAK_CYCLES sets the counted cycles (the `soak` label runs
// more than the normal suite).
#include <gtest/gtest.h>

#include "tests/sanitized.hpp"

#include <spdlog/fmt/fmt.h>

#include <cstdlib>
#include <string>

#include "daemon_process.hpp"
#include "load_support.hpp"

namespace calrt_load {
namespace {

using namespace std::chrono_literals;

constexpr int kWarmupCycles = 20;
// Under a sanitizer only the fd count is compared (below), and a leak of one descriptor per
// cycle shows in 50 cycles as well as in 200; the sanitized cycle costs four times as much.
constexpr int kDefaultCycles = calrt_test::kSanitized ? 50 : 200;
constexpr size_t kRssTolerance = 2u << 20;
// Under AddressSanitizer freed memory sits in its quarantine (256 MiB by default) and stays
// resident, so the daemon's RSS climbs without a leak; ThreadSanitizer's shadow and history
// grow likewise. There only the fd count is compared (the normal build compares both).
constexpr bool kRssIsMeaningful = !calrt_test::kSanitized;

int soak_cycles() {
  const char* text = std::getenv("CALRT_LOAD_SOAK_CYCLES");
  return text != nullptr && std::atoi(text) > 0 ? std::atoi(text) : kDefaultCycles;
}

// The daemon's fd count once it has stopped changing: a departed client's socket is closed
// asynchronously.
size_t settled_fds(const calrt_test::DaemonProcess& daemon) {
  size_t last = daemon.open_fds();
  int same = 0;
  const auto deadline = Clock::now() + 5s;
  while (same < 5 && Clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
    const size_t now = daemon.open_fds();
    same = now == last ? same + 1 : 0;
    last = now;
  }
  return last;
}

TEST(Soak, FdsAndRssDoNotGrow) {
  const GoldenInputs& golden = golden_inputs();
  const size_t case_index = golden.case_index("len1");
  ScratchDir dir;
  calrt_test::DaemonProcess daemon(dir.path());
  const calrt::Api api = client_api(daemon.endpoint());

  auto cycle = [&](int n) {
    const ClientOutcome outcome = run_golden_client(api, golden, case_index);
    ASSERT_TRUE(outcome.passed()) << "cycle " << n << ": "
                                  << fmt::format("{}", fmt::join(outcome.failures, "\n  "));
  };
  for (int n = 0; n < kWarmupCycles; ++n) {
    ASSERT_NO_FATAL_FAILURE(cycle(n));
  }
  const size_t fds_before = settled_fds(daemon);
  const size_t rss_before = daemon.rss_bytes();
  const int cycles = soak_cycles();
  const auto started = Clock::now();
  for (int n = 0; n < cycles; ++n) {
    ASSERT_NO_FATAL_FAILURE(cycle(kWarmupCycles + n));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const size_t fds_after = settled_fds(daemon);
  const size_t rss_after = daemon.rss_bytes();
  std::printf(
      "soak: %d cycles (after %d warm-up) in %.1f s; daemon fds %zu -> %zu, RSS %.2f -> "
      "%.2f MiB\n",
      cycles, kWarmupCycles, seconds, fds_before, fds_after,
      static_cast<double>(rss_before) / (1 << 20), static_cast<double>(rss_after) / (1 << 20));
  RecordProperty("cycles", cycles);
  RecordProperty("fds_before", static_cast<int>(fds_before));
  RecordProperty("fds_after", static_cast<int>(fds_after));
  RecordProperty("rss_before_kib", static_cast<int>(rss_before >> 10));
  RecordProperty("rss_after_kib", static_cast<int>(rss_after >> 10));
  EXPECT_LE(fds_after, fds_before) << "the daemon leaks file descriptors";
  if (kRssIsMeaningful) {
    EXPECT_LE(rss_after, rss_before + kRssTolerance) << "the daemon's resident memory grows";
  }
}

}  // namespace
}  // namespace calrt_load
