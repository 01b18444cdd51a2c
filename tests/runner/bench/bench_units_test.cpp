// Pieces of `calrt bench` that need no device: the sampler, the prompt generator, the logits
// fingerprint, the Chrome trace writer and the command-line quoting of the reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/bench/bench_engine.hpp"
#include "runner/bench/bench_report.hpp"
#include "runner/core/report/chrome_trace.hpp"
#include "runner/core/sampling.hpp"

namespace runner {
namespace {

std::vector<float> ramp(size_t n) {
  std::vector<float> logits(n);
  for (size_t i = 0; i < n; ++i) {
    logits[i] = static_cast<float>(std::sin(static_cast<double>(i) * 0.37)) * 4.0f;
  }
  return logits;
}

TEST(BenchSampling, GreedyIsTheArgmaxLowestIdOnTies) {
  SamplingConfig greedy;
  EXPECT_EQ(sample_token(std::vector<float>{0.5f, 2.0f, 2.0f, -1.0f}, greedy, 0), 1);
  EXPECT_EQ(sample_token(std::vector<float>(8, 0.0f), greedy, 99), 0);  // timing-only: all zero
  EXPECT_EQ(sample_token(std::vector<float>{}, greedy, 0), -1);
}

TEST(BenchSampling, TopKIsDeterministicPerStreamAndStaysInTheTopK) {
  const std::vector<float> logits = ramp(1000);
  SamplingConfig config;
  config.method = SamplingMethod::top_k;
  config.top_k = 5;
  config.temperature = 2.0;
  std::vector<int32_t> sorted_ids(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    sorted_ids[i] = static_cast<int32_t>(i);
  }
  std::stable_sort(sorted_ids.begin(), sorted_ids.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const std::set<int32_t> top5(sorted_ids.begin(), sorted_ids.begin() + 5);
  std::set<int32_t> seen;
  for (uint64_t step = 0; step < 200; ++step) {
    const uint64_t stream = derive_stream(7, {0, 1, 2, step});
    const int32_t token = sample_token(logits, config, stream);
    EXPECT_EQ(token, sample_token(logits, config, stream)) << "same stream, same token";
    EXPECT_TRUE(top5.count(token)) << token;
    seen.insert(token);
  }
  EXPECT_GT(seen.size(), 2u) << "a temperature of 2 spreads the draws over the candidates";
}

TEST(BenchSampling, TopOneIsGreedyAndNanNeverWins) {
  std::vector<float> logits = ramp(300);
  SamplingConfig config;
  config.method = SamplingMethod::top_k;
  config.top_k = 1;
  EXPECT_EQ(sample_token(logits, config, 123), sample_token(logits, SamplingConfig{}, 0));
  logits[5] = std::numeric_limits<float>::quiet_NaN();
  config.top_k = 1000;  // more than the vocabulary: clipped
  for (uint64_t s = 0; s < 50; ++s) {
    EXPECT_NE(sample_token(logits, config, s), 5);
  }
}

// The draw alone, as the bench's fused path and a ranked decode make it: the candidates' logits
// best first. Two equal candidates, and a third far below: the draws split between the first
// two about evenly (e^-20 leaves the third out), the same stream draws the same index, NaN
// is never drawn, and nothing to draw from gives the first place.
TEST(BenchSampling, TheDrawAloneSplitsByTheSoftmax) {
  const std::vector<float> ranked = {3.0f, 3.0f, -17.0f};
  size_t firsts = 0;
  for (uint64_t s = 0; s < 1000; ++s) {
    const size_t drawn = draw_candidate(ranked, 1.0, derive_stream(5, {s}));
    ASSERT_LT(drawn, 2u);
    EXPECT_EQ(drawn, draw_candidate(ranked, 1.0, derive_stream(5, {s})));
    firsts += drawn == 0 ? 1 : 0;
  }
  EXPECT_GT(firsts, 430u);
  EXPECT_LT(firsts, 570u);
  const std::vector<float> with_nan = {2.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f};
  for (uint64_t s = 0; s < 100; ++s) EXPECT_NE(draw_candidate(with_nan, 1.0, s), 1u);
  EXPECT_EQ(draw_candidate({}, 1.0, 3), 0u);
}

TEST(BenchSampling, StreamsDifferPerCoordinate) {
  EXPECT_NE(derive_stream(1, {0, 0, 0}), derive_stream(1, {0, 0, 1}));
  EXPECT_NE(derive_stream(1, {0, 1, 0}), derive_stream(1, {1, 0, 0}));
  EXPECT_NE(derive_stream(1, {0}), derive_stream(2, {0}));
  EXPECT_EQ(derive_stream(5, {3, 4}), derive_stream(5, {3, 4}));
}

TEST(BenchPrompt, SeededInRangeAndIndependentOfOtherRequests) {
  const auto a = bench_prompt(1, RunKey{false, 0}, 0, 500, 1000);
  EXPECT_EQ(a, bench_prompt(1, RunKey{false, 0}, 0, 500, 1000));
  EXPECT_NE(a, bench_prompt(1, RunKey{false, 0}, 1, 500, 1000));
  EXPECT_NE(a, bench_prompt(1, RunKey{true, 0}, 0, 500, 1000));
  EXPECT_NE(a, bench_prompt(2, RunKey{false, 0}, 0, 500, 1000));
  for (const int32_t token : a) {
    EXPECT_GE(token, 0);
    EXPECT_LT(token, 1000);
  }
}

TEST(BenchFingerprint, Xxh3OfTheFloatBytes) {
  // XXH3-64 of the empty input, from xxHash's own test vectors (seed 0).
  EXPECT_EQ(logits_fingerprint({}), 0x2D06800538D394C2ull);
  const std::vector<float> a = {1.0f, 2.0f};
  std::vector<float> b = a;
  EXPECT_EQ(logits_fingerprint(a), logits_fingerprint(b));
  b[1] = std::nextafter(2.0f, 3.0f);  // one ulp
  EXPECT_NE(logits_fingerprint(a), logits_fingerprint(b));
  EXPECT_NE(logits_fingerprint(std::vector<float>{0.0f}),
            logits_fingerprint(std::vector<float>{-0.0f}));
}

TEST(BenchChromeTrace, MicrosecondsAreExactDecimals) {
  EXPECT_EQ(format_us(0), "0.000");
  EXPECT_EQ(format_us(1), "0.001");
  EXPECT_EQ(format_us(12345), "12.345");
  EXPECT_EQ(format_us(1000000), "1000.000");
  EXPECT_EQ(format_us(-5), "-0.005");
  EXPECT_EQ(format_us(std::numeric_limits<int64_t>::max()), "9223372036854775.807");
}

TEST(BenchChromeTrace, DocumentParsesWithNamedTracks) {
  ChromeTrace trace;
  trace.process(1, "device", 0);
  trace.thread(1, 1, "chip 0", 0);
  trace.complete(1, 1, "attention \"q\"\n", "compute", 1500, 250,
                 {ChromeTrace::arg("job", uint64_t{3}), ChromeTrace::arg("layer", int64_t{-1}),
                  ChromeTrace::arg("mode", "sync"), ChromeTrace::arg("warmup", false)});
  EXPECT_EQ(trace.complete_events(), 1u);
  const nlohmann::json doc = nlohmann::json::parse(trace.to_json());
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  const auto& events = doc["traceEvents"];
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0]["args"]["name"], "device");
  EXPECT_EQ(events[2]["args"]["name"], "chip 0");
  const auto& x = events[4];
  EXPECT_EQ(x["ph"], "X");
  EXPECT_EQ(x["name"], "attention \"q\"\n");
  EXPECT_DOUBLE_EQ(x["ts"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(x["dur"].get<double>(), 0.25);
  EXPECT_EQ(x["args"]["job"], 3);
  EXPECT_EQ(x["args"]["layer"], -1);
  EXPECT_EQ(x["args"]["mode"], "sync");
  EXPECT_EQ(x["args"]["warmup"], false);
}

TEST(BenchReport, CommandLineIsShellQuoted) {
  EXPECT_EQ(shell_command_line({"calrt", "bench", "dir/tiny", "--json", "r.json"}),
            "calrt bench dir/tiny --json r.json");
  EXPECT_EQ(shell_command_line({"calrt", "--device-config", "seed=1;dram_mib=64"}),
            "calrt --device-config 'seed=1;dram_mib=64'");
  EXPECT_EQ(shell_command_line({"a b", "it's", ""}), "'a b' 'it'\\''s' ''");
}

// The sync/parallel comparison on hand-made records: a fingerprint that differs at one token
// fails it and names the token; a timing-only run (no fingerprints) compares tokens only.
ModeRecord one_request(const char* mode, std::vector<int32_t> tokens,
                       std::vector<uint64_t> hashes) {
  ModeRecord record;
  record.mode = mode;
  SequenceRecord seq;
  seq.run.run = 0;
  seq.seq = 0;
  seq.tokens = std::move(tokens);
  seq.logits_hashes = std::move(hashes);
  record.sequences.push_back(std::move(seq));
  return record;
}

TEST(BenchCompare, LogitsThatDifferAtOneTokenFailAndNameIt) {
  const ModeRecord sync = one_request("sync", {5, 6, 7}, {1, 2, 3});
  const ModeRecord parallel = one_request("parallel", {5, 6, 7}, {1, 9, 3});
  const BenchComparison c = compare_modes(sync, {}, parallel, {});
  EXPECT_TRUE(c.logits_compared);
  EXPECT_FALSE(c.logits_identical);
  EXPECT_TRUE(c.tokens_identical);
  EXPECT_NE(c.first_difference.find("token 1: logits fingerprint"), std::string::npos)
      << c.first_difference;

  const BenchComparison same = compare_modes(sync, {}, sync, {});
  EXPECT_TRUE(same.logits_compared);
  EXPECT_TRUE(same.logits_identical);
  EXPECT_TRUE(same.first_difference.empty()) << same.first_difference;
}

TEST(BenchCompare, TimingOnlyRunsCompareTokensOnly) {
  const ModeRecord sync = one_request("sync", {0, 0, 0}, {});
  const BenchComparison same = compare_modes(sync, {}, one_request("parallel", {0, 0, 0}, {}), {});
  EXPECT_FALSE(same.logits_compared);
  EXPECT_TRUE(same.logits_identical);
  EXPECT_TRUE(same.tokens_identical);
  const BenchComparison other = compare_modes(sync, {}, one_request("parallel", {0, 4, 0}, {}), {});
  EXPECT_FALSE(other.tokens_identical);
  EXPECT_NE(other.first_difference.find("token 1: 0 (sync) != 4 (parallel)"), std::string::npos)
      << other.first_difference;
}

}  // namespace
}  // namespace runner
