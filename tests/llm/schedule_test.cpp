// Scheduling: many requests at once give each the tokens and logits it gets alone, bit for
// bit, on a batch-1 calbin (turns on the ping/pong slots) and on a batch-4 calbin (continuous
// batching: requests join and leave rows between steps). The first tokens of a golden case
// match the device-contract reference of the calbin's golden set (an independent path).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "calbin/golden.hpp"
#include "llm/host/ranking.hpp"
#include "tests/llm/engine_fixture.hpp"

namespace calrt::llm::test {
namespace {

// Requests of mixed prompt lengths (around the prefill chunk) and generation lengths, so that
// they start and end at different steps.
std::vector<Request> mixed_requests(uint32_t vocab, uint32_t chunk, size_t count) {
  const uint32_t lengths[] = {1, 2, 15, 16, 17, chunk - 1, chunk, chunk + 1};
  std::vector<Request> out;
  for (size_t i = 0; i < count; ++i) {
    out.push_back(
        greedy_request(prompt_of(lengths[i % std::size(lengths)], static_cast<uint32_t>(i), vocab),
                       static_cast<uint32_t>(3 + (i * 5) % 11), true));
  }
  return out;
}

// Runs `requests` together, then each alone, and compares tokens and logits bit for bit.
// Adds the rows and slots the tokens under load came from.
void expect_same_as_alone(Engine& engine, const std::vector<Request>& requests,
                          std::set<uint32_t>& rows, std::set<uint32_t>& slots) {
  std::vector<RequestId> ids;
  for (const Request& r : requests) {
    auto id = engine.submit(r);
    EXPECT_TRUE(id) << id.error().to_string();
    if (id) ids.push_back(*id);
  }
  RunLog load = run_all(engine);
  for (size_t i = 0; i < ids.size(); ++i) {
    const Outcome& outcome = load.outcomes.at(ids[i]);
    ASSERT_TRUE(outcome.ok()) << outcome.error->to_string();
    expect_ledger_zero(engine, outcome);
    std::vector<TokenEvent> alone_tokens;
    const Outcome alone = run_alone(engine, requests[i], kRunTimeout, &alone_tokens);
    ASSERT_TRUE(alone.ok()) << alone.error->to_string();
    EXPECT_EQ(outcome.tokens, alone.tokens) << "request " << i << " differs under load";
    const auto& loaded = load.tokens.at(ids[i]);
    ASSERT_EQ(loaded.size(), alone_tokens.size());
    for (size_t step = 0; step < loaded.size(); ++step) {
      rows.insert(loaded[step].row);
      slots.insert(loaded[step].slot);
      EXPECT_EQ(loaded[step].step, step);
      ASSERT_EQ(loaded[step].logits.size(), alone_tokens[step].logits.size());
      EXPECT_TRUE(std::equal(loaded[step].logits.begin(), loaded[step].logits.end(),
                             alone_tokens[step].logits.begin(),
                             [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; }))
          << "request " << i << " step " << step << " row " << loaded[step].row
          << ": logits differ from the request alone";
    }
  }
  EXPECT_TRUE(engine.stats().ledger.zero()) << engine.stats().ledger.to_string();
}

TEST(Schedule, Batch1InterleavedRequestsMatchEachAlone) {
  auto engine = open_or_fail(config_for(kTiny, kTinyService));
  ASSERT_TRUE(engine);
  const Capabilities& caps = engine->capabilities();
  std::set<uint32_t> rows, slots;
  expect_same_as_alone(*engine, mixed_requests(caps.vocab, caps.prefill_chunk, 6), rows, slots);
  EXPECT_EQ(rows, std::set<uint32_t>{0});
  EXPECT_EQ(slots, (std::set<uint32_t>{0, 1})) << "parallel mode used one slot only";
}

TEST(Schedule, Batch4ContinuousBatchingMatchesEachAlone) {
  auto engine = open_or_fail(config_for(CALRT_LLM_BATCH4_CALBIN));
  ASSERT_TRUE(engine);
  const Capabilities& caps = engine->capabilities();
  ASSERT_EQ(caps.n_batch, 4u);
  std::set<uint32_t> rows, slots;
  expect_same_as_alone(*engine, mixed_requests(caps.vocab, caps.prefill_chunk, 7), rows, slots);
  EXPECT_EQ(rows, (std::set<uint32_t>{0, 1, 2, 3})) << "the decode never filled the batch";
}

// The device-contract reference gives the device's logits (MODEL.md) under teacher forcing
// with the FP32 greedy tokens: while the engine's tokens equal those, each one must be the
// argmax of the contract row of the token before it.
TEST(Schedule, GreedyTokensFollowTheGoldenContractRows) {
  auto golden = calbin::read_golden(std::filesystem::path(CALRT_LLM_TINY_CALBIN) / "golden");
  ASSERT_TRUE(golden) << golden.error().to_string();
  auto engine = open_or_fail(config_for(kTiny, kTinyService));
  ASSERT_TRUE(engine);
  const uint32_t vocab = golden->vocab;
  size_t checked = 0;
  for (const calbin::GoldenCase& g : golden->cases) {
    if (g.long_case || g.contract_rows.empty()) continue;
    const uint32_t steps = std::min<uint32_t>(g.decode_steps + 1, 6);
    const Outcome run = run_alone(*engine, greedy_request(g.tokens, steps), kRunTimeout);
    ASSERT_TRUE(run.ok()) << g.name << ": " << run.error->to_string();
    for (uint32_t s = 0; s < steps; ++s) {
      const auto index = static_cast<int32_t>(g.prompt_len - 1 + s);
      const auto row = std::find(g.contract_rows.begin(), g.contract_rows.end(), index);
      if (row == g.contract_rows.end()) break;
      const std::span<const float> logits(
          g.contract_logits.data() + (row - g.contract_rows.begin()) * vocab, vocab);
      EXPECT_EQ(run.tokens[s], argmax(logits)) << g.name << " step " << s;
      ++checked;
      if (run.tokens[s] != g.greedy[s]) break;  // the history left the teacher's
    }
  }
  EXPECT_GT(checked, 0u) << "no golden case had contract rows to compare";
}

}  // namespace
}  // namespace calrt::llm::test
