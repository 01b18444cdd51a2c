#include "simdev/gen/reference/reference_model.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "simdev/gen/reference/golden_cases.hpp"
#include "simdev/gen/reference/reference_weights.hpp"
#include "simdev/gen/tiny_preset.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen::ref {
namespace {

const Model& tiny_model() {
  static const Model model = [] {
    const ModelConfig config = tiny_config();
    auto weights = dequantised_unsplit(config, make_weights(config, 5));
    EXPECT_TRUE(weights.has_value());
    auto created = Model::create(config, *weights);
    EXPECT_TRUE(created.has_value()) << created.error().to_string();
    return *created;
  }();
  return model;
}

std::vector<int32_t> prompt(size_t length) {
  std::vector<int32_t> tokens(length);
  for (size_t i = 0; i < length; ++i) {
    tokens[i] = static_cast<int32_t>((i * 37 + 11) % 1000);
  }
  return tokens;
}

std::vector<int32_t> positions(size_t begin, size_t length) {
  std::vector<int32_t> out(length);
  std::iota(out.begin(), out.end(), static_cast<int32_t>(begin));
  return out;
}

void expect_close(std::span<const float> a, std::span<const float> b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tolerance) << "at " << i;
  }
}

TEST(ReferenceModel, BlockEqualsTokenByToken) {
  const size_t n = 40, vocab = 1000;
  const std::vector<int32_t> tokens = prompt(n);
  Session block(tiny_model());
  const auto all = block.forward(tokens, positions(0, n), true);
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), n * vocab);
  Session stepwise(tiny_model());
  for (size_t t = 0; t < n; ++t) {
    const auto logits = stepwise.forward(std::span(tokens).subspan(t, 1), positions(t, 1));
    ASSERT_TRUE(logits.has_value());
    expect_close(*logits, std::span(*all).subspan(t * vocab, vocab), 1e-4f);
  }
  EXPECT_EQ(stepwise.kv_length(), n);
}

// A longer prompt must not change the logits of the positions a shorter one shares with it:
// this fails if attention reads slots beyond the causal limit.
TEST(ReferenceModel, PrefixConsistency) {
  const size_t n = 300, vocab = 1000;
  const std::vector<int32_t> tokens = prompt(n);
  Session longer(tiny_model());
  const auto all = longer.forward(tokens, positions(0, n), true);
  ASSERT_TRUE(all.has_value());
  for (const size_t prefix : {size_t{1}, size_t{17}, size_t{256}}) {
    Session shorter(tiny_model());
    const auto last = shorter.forward(std::span(tokens).first(prefix), positions(0, prefix));
    ASSERT_TRUE(last.has_value());
    expect_close(*last, std::span(*all).subspan((prefix - 1) * vocab, vocab), 1e-4f);
  }
}

TEST(ReferenceModel, LogitsHaveClearGreedyMargins) {
  Session session(tiny_model());
  const auto logits = session.forward(prompt(20), positions(0, 20));
  ASSERT_TRUE(logits.has_value());
  double sum = 0.0, sum_squares = 0.0;
  for (const float v : *logits) {
    sum += v;
    sum_squares += double{v} * v;
  }
  const double mean = sum / 1000.0;
  const double std_dev = std::sqrt(sum_squares / 1000.0 - mean * mean);
  EXPECT_GT(std_dev, 1.0);
  EXPECT_LT(std_dev, 10.0);
}

TEST(ReferenceModel, PositionsChangeTheLogits) {
  Session a(tiny_model()), b(tiny_model());
  const std::vector<int32_t> tokens = prompt(4);
  const auto at_zero = a.forward(tokens, positions(0, 4));
  const auto shifted = b.forward(tokens, positions(100, 4));
  ASSERT_TRUE(at_zero && shifted);
  EXPECT_NE(*at_zero, *shifted);
}

TEST(ReferenceModel, RejectsContextOverflowAndBadTokens) {
  Session session(tiny_model());
  const size_t context = tiny_model().config().context;
  const std::vector<int32_t> too_long(context + 1, 1);
  EXPECT_FALSE(session.forward(too_long, positions(0, context + 1)).has_value());
  const std::vector<int32_t> bad = {1000};
  EXPECT_FALSE(session.forward(bad, positions(0, 1)).has_value());
  EXPECT_EQ(session.kv_length(), 0u);
}

TEST(ReferenceModel, CreateRejectsAMisshapenWeight) {
  const ModelConfig config = tiny_config();
  auto weights = dequantised_unsplit(config, make_weights(config, 5));
  ASSERT_TRUE(weights.has_value());
  weights->layers[1].o_proj.rows -= 1;
  const auto created = Model::create(config, *weights);
  ASSERT_FALSE(created.has_value());
  EXPECT_NE(created.error().to_string().find("layers.1.attn.o_proj"), std::string::npos);
}

TEST(GoldenCases, TopIdsAreDescendingWithLowIdTies) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f, 2.0f};
  EXPECT_EQ(top_ids(logits, 3), (std::vector<int32_t>{1, 2, 4}));
}

// Long cases share their prefill; the chain must give exactly what separate runs give.
TEST(GoldenCases, ChainEqualsSeparateRuns) {
  const std::vector<CaseSpec> chain = {
      {"a", 40, false, "s"}, {"b", 9, false, "s"}, {"c", 10, false, "s"}};
  const auto chained = run_golden_chain(tiny_model(), chain, 3);
  ASSERT_TRUE(chained.has_value());
  ASSERT_EQ(chained->size(), 3u);
  for (const calbin::GoldenCase& got : *chained) {
    const CaseSpec spec{got.name, got.prompt_len, false, "s"};
    const auto alone = run_golden_case(tiny_model(), spec, 3);
    ASSERT_TRUE(alone.has_value());
    EXPECT_EQ(got.tokens, alone->tokens);
    EXPECT_EQ(got.prefill_logits, alone->prefill_logits) << got.name;
    EXPECT_EQ(got.greedy, alone->greedy) << got.name;
    EXPECT_EQ(got.decode_logits, alone->decode_logits) << got.name;
  }
  EXPECT_EQ((*chained)[0].prompt_len, 9u);
  EXPECT_EQ(std::vector<int32_t>((*chained)[2].tokens.begin(), (*chained)[2].tokens.begin() + 10),
            (*chained)[1].tokens);
}

TEST(GoldenCases, SpecsCoverTheEdgesAndTheContextLimit) {
  const ModelConfig config = tiny_config();
  std::vector<uint32_t> lengths;
  for (const CaseSpec& spec : golden_case_specs(config, true)) {
    lengths.push_back(spec.prompt_len);
    EXPECT_EQ(spec.long_case, spec.prompt_len >= 4095);
  }
  EXPECT_EQ(lengths, (std::vector<uint32_t>{1, 2, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097,
                                            config.context - kGoldenDecodeSteps}));
  EXPECT_EQ(golden_case_specs(config, false).size(), 8u);
}

}  // namespace
}  // namespace simdev::gen::ref
