// A decode that ranks on the device (simdev gen --decode-top-k 40: per row its 40 best ids and
// their logits instead of the full row): the service manifest declares it (decode_top_k), the
// contract check holds the device to that, greedy takes the first id, sampling draws from the
// first k, and the tokens are those of the full-row calbin of the same model and seed.
#include <gtest/gtest.h>

#include <regex>

#include "tests/llm/engine_fixture.hpp"

namespace calrt::llm::test {
namespace {

const std::filesystem::path kRanked = CALRT_LLM_RANKED_CALBIN;

// The tiny calbin's service manifest with `extra` keys; a ranked decode needs ABI 0.9
// (calrt.h, CALRT_ROLE_TOP_IDS), which its calbin declares.
std::filesystem::path service_with(const std::string& name, const std::string& extra,
                                   bool ranked = true) {
  const std::filesystem::path dir = std::filesystem::path(CALRT_LLM_SCRATCH) / "ranked";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / (name + ".yaml");
  const std::string text = read_text(kTinyService);
  std::ofstream(path) << (ranked ? std::regex_replace(text, std::regex("runtime_abi: 0.7.6"),
                                                      "runtime_abi: 0.9.0")
                                 : text)
                      << extra;
  return path;
}

TEST(Ranked, GreedyTokensEqualTheFullRowCalbins) {
  auto ranked = open_or_fail(config_for(kRanked, service_with("top40", "decode_top_k: 40\n")));
  auto full = open_or_fail(config_for(kTiny, kTinyService));
  ASSERT_TRUE(ranked && full);
  EXPECT_EQ(ranked->capabilities().decode_top_k, 40u);
  for (uint32_t i = 0; i < 4; ++i) {
    const Request r = greedy_request(prompt_of(3 + 7 * i, i, 1000), 8, i % 2 == 0);
    std::vector<TokenEvent> events;
    const Outcome a = run_alone(*ranked, r, kRunTimeout, &events);
    const Outcome b = run_alone(*full, r, kRunTimeout);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.tokens, b.tokens) << "request " << i;
    expect_ledger_zero(*ranked, a);
    if (r.want_logits) {
      // The prefill gives a full row; every decode step its 40 ranked ids and values.
      ASSERT_EQ(events.size(), 8u);
      EXPECT_EQ(events[1].top_ids.size(), 40u);
      EXPECT_EQ(events[1].logits.size(), 40u);
      EXPECT_EQ(events[1].top_ids.front(), a.tokens[1]);
    }
  }
}

TEST(Ranked, SamplingPastTheDevicesKIsRefused) {
  auto ranked = open_or_fail(config_for(kRanked));  // decode_top_k derived from the calbin
  ASSERT_TRUE(ranked);
  Request r = greedy_request({1, 2, 3}, 4);
  r.sampling.method = SamplingMethod::top_k;
  r.sampling.top_k = 41;
  auto refused = ranked->submit(r);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::invalid_request);
  r.sampling.top_k = 40;
  r.sampling.seed = 5;
  const Outcome first = run_alone(*ranked, r, kRunTimeout);
  const Outcome again = run_alone(*ranked, r, kRunTimeout);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first.tokens, again.tokens);
}

TEST(Ranked, FullRowsAgainstTopKAreModelMismatches) {
  const struct {
    std::filesystem::path calbin;
    std::string extra;
    std::vector<std::string> named;
    bool ranked = true;
  } cases[] = {
      {kRanked, "", {"decode_top_k is not set", "40 best ids"}},
      {kRanked, "decode_top_k: 20\n", {"decode_top_k is 20", "40"}},
      {kTiny, "decode_top_k: 40\n", {"decode_top_k is 40", "full logits rows"}, false},
  };
  int n = 0;
  for (const auto& c : cases) {
    auto engine = Engine::open(
        config_for(c.calbin, service_with("case" + std::to_string(n++), c.extra, c.ranked)));
    ASSERT_FALSE(engine) << c.extra;
    EXPECT_EQ(engine.error().code, ErrorCode::model_mismatch);
    for (const std::string& part : c.named) {
      EXPECT_NE(engine.error().message.find(part), std::string::npos)
          << "\"" << part << "\" not in: " << engine.error().message;
    }
  }
}

}  // namespace
}  // namespace calrt::llm::test
