// The device's host threads (DeviceConfig::host_threads, base/workers.hpp) change speed, not
// results: the same calls on 1, 2 and 3 threads give the same output bytes at every step and
// the same state hash. On the two-chip tiny model the chips run side by side; on a one-chip
// model its matmuls, lm_head rows and attention heads are split between the threads, unevenly
// on 3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "simdev/gen/generate.hpp"
#include "tests/simdev/device/sim_session.hpp"

namespace simdev::test {
namespace {

namespace fs = std::filesystem;

fs::path one_chip_calbin() {
  static std::once_flag once;
  static fs::path path;
  std::call_once(once, [] {
    path = fs::path(SIMDEV_TEST_BUILD_DIR) / "device-test-calbins" / "qwen3-small-1chip";
    if (fs::exists(path / "manifest.json")) return;
    gen::GenOptions options;
    options.config_file = fs::path(CALRT_GEN_CONFIGS) / "qwen3-small-1chip.yaml";
    options.out_dir = path;
    options.with_golden = false;
    options.force = true;
    auto made = gen::generate(options);
    if (!made) ADD_FAILURE() << "generating " << path << " failed: " << made.error().to_string();
  });
  return path;
}

struct Trace {
  std::vector<std::vector<uint16_t>> outputs;  // every step's logits as stored
  uint64_t hash = 0;
};

// A prompt of `length` seeded tokens in chunks, then greedy decode steps.
Trace run(const fs::path& calbin, unsigned threads, size_t length, size_t chunk) {
  Session s("host_threads=" + std::to_string(threads), 1024, calbin);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(s.vocab) - 1);
  std::vector<int32_t> prompt(length);
  for (int32_t& t : prompt) t = token(rng);
  Trace trace;
  for (size_t done = 0; done < length; done += chunk) {
    const size_t count = std::min(chunk, length - done);
    std::vector<int32_t> positions(count);
    for (size_t i = 0; i < count; ++i) positions[i] = static_cast<int32_t>(done + i);
    const StepResult r = s.step(true,
                                {prompt.begin() + static_cast<std::ptrdiff_t>(done),
                                 prompt.begin() + static_cast<std::ptrdiff_t>(done + count)},
                                positions, done);
    EXPECT_EQ(r.state, CALRT_JOB_COMPLETED) << r.message;
    trace.outputs.push_back(r.logits_raw);
  }
  std::vector<float> last_logits;
  for (size_t step = 0; step < 6; ++step) {
    const auto& logits = trace.outputs.back();
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    const auto position = static_cast<int32_t>(length + step);
    const StepResult r = s.step(false, {static_cast<int32_t>(best)}, {position}, length + step);
    EXPECT_EQ(r.state, CALRT_JOB_COMPLETED) << r.message;
    trace.outputs.push_back(r.logits_raw);
  }
  trace.hash = state_hash(s.device);
  return trace;
}

void expect_same_on_every_thread_count(const fs::path& calbin, size_t length, size_t chunk) {
  const Trace one = run(calbin, 1, length, chunk);
  ASSERT_FALSE(one.outputs.empty());
  for (const unsigned threads : {2u, 3u}) {
    const Trace many = run(calbin, threads, length, chunk);
    ASSERT_EQ(many.outputs.size(), one.outputs.size());
    for (size_t i = 0; i < one.outputs.size(); ++i) {
      EXPECT_EQ(many.outputs[i], one.outputs[i]) << threads << " threads, step " << i;
    }
    EXPECT_EQ(many.hash, one.hash) << threads << " threads";
  }
}

TEST(HostThreads, TwoChipsSideBySideGiveTheOneThreadBytes) {
  expect_same_on_every_thread_count(tiny_calbin(), 300, 256);
}

TEST(HostThreads, OneChipSplitGivesTheOneThreadBytes) {
  expect_same_on_every_thread_count(one_chip_calbin(), 600, 128);
}

}  // namespace
}  // namespace simdev::test
