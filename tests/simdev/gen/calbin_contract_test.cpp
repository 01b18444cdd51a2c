// The references `calrt smoke` computes from a calbin for a golden set without contract rows
// (simdev/gen/reference/calbin_contract.hpp). On a calbin whose golden simdev gen wrote, they
// must be the stored rows bit for bit: the contract rows and probes, and the FP32 model's rows
// teacher-forced with the golden's tokens. The golden's own writer is an independent path
// through the same references (golden_cases.cpp, which shares a prefix's prefill between
// cases), so a difference names a defect of one of the two.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "calbin/golden.hpp"
#include "calbin/manifest.hpp"
#include "gen_fixture.hpp"
#include "simdev/gen/generate.hpp"
#include "simdev/gen/reference/calbin_contract.hpp"

namespace simdev::gen {
namespace {

namespace fs = std::filesystem;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Computed {
  calbin::GoldenSet stored;
  calbin::GoldenSet computed;  // the stored cases with their contract rows recomputed
  std::vector<calbin::GoldenCase> fp32;
};

Computed compute(const fs::path& dir) {
  Computed out;
  const auto manifest = calbin::read_manifest(dir);
  EXPECT_TRUE(manifest.has_value());
  auto golden = calbin::read_golden(dir / "golden");
  EXPECT_TRUE(golden.has_value()) << golden.error().to_string();
  out.stored = *golden;
  out.computed = *golden;
  std::vector<calbin::GoldenCase*> cases;
  for (calbin::GoldenCase& c : out.computed.cases) {
    c.contract_rows.clear();
    c.contract_logits.clear();
    c.contract_probes.clear();
    cases.push_back(&c);
  }
  out.fp32.resize(cases.size());
  auto added = add_calbin_references(dir, *manifest, cases, out.fp32, 2);
  EXPECT_TRUE(added.has_value()) << added.error().to_string();
  return out;
}

void expect_stored(const Computed& r) {
  ASSERT_EQ(r.stored.cases.size(), r.computed.cases.size());
  for (size_t i = 0; i < r.stored.cases.size(); ++i) {
    const calbin::GoldenCase& want = r.stored.cases[i];
    const calbin::GoldenCase& got = r.computed.cases[i];
    EXPECT_EQ(got.contract_rows, want.contract_rows) << want.name;
    EXPECT_TRUE(same_bits(got.contract_logits, want.contract_logits)) << want.name;
    EXPECT_TRUE(same_bits(got.contract_probes, want.contract_probes)) << want.name;
    const calbin::GoldenCase& fp32 = r.fp32[i];
    EXPECT_TRUE(same_bits(fp32.prefill_logits, want.prefill_logits)) << want.name;
    EXPECT_TRUE(same_bits(fp32.decode_logits, want.decode_logits)) << want.name;
    EXPECT_EQ(fp32.greedy, want.greedy) << want.name;
    EXPECT_EQ(fp32.top_ids, want.top_ids) << want.name;
    EXPECT_EQ(fp32.contract_rows, want.contract_rows) << want.name;
  }
}

TEST(CalbinReferences, EqualTheGoldenSetsOwnRowsBitForBit) {
  expect_stored(compute(testing::tiny_calbin()));
}

// At depth and on a mixture of experts too: the contract is exact only if the two paths
// agree on every reduction, layer after layer.
TEST(CalbinReferences, EqualTheStoredRowsOfADeepModelAndAMixtureOfExperts) {
  for (const char* config : {"qwen3-deep-28.yaml", "qwen3-moe-deep-24.yaml"}) {
    GenOptions options;
    options.config_file = fs::path(CALRT_GEN_CONFIGS) / config;
    options.out_dir = testing::scratch_root() / config;
    options.seed = 3;
    options.long_cases = false;
    options.force = true;
    const auto generated = generate(options);
    ASSERT_TRUE(generated.has_value()) << generated.error().to_string();
    SCOPED_TRACE(config);
    expect_stored(compute(options.out_dir));
  }
}

// The negative control: a golden case whose tokens differ from the ones its rows were
// computed for gets other rows, so the comparison above can fail.
TEST(CalbinReferences, OtherTokensGiveOtherRows) {
  Computed r = compute(testing::tiny_calbin());
  const auto manifest = calbin::read_manifest(testing::tiny_calbin());
  calbin::GoldenCase changed = r.stored.cases.back();
  changed.tokens.back() = (changed.tokens.back() + 1) % static_cast<int32_t>(r.stored.vocab);
  std::vector<calbin::GoldenCase*> cases{&changed};
  std::vector<calbin::GoldenCase> fp32(1);
  ASSERT_TRUE(add_calbin_references(testing::tiny_calbin(), *manifest, cases, fp32, 1));
  EXPECT_FALSE(same_bits(changed.contract_logits, r.stored.cases.back().contract_logits));
  EXPECT_FALSE(same_bits(fp32[0].prefill_logits, r.stored.cases.back().prefill_logits));
}

TEST(CalbinReferences, ACalbinWithoutWeightsSaysWhy) {
  calbin::Manifest none;
  none.llm.layers = 2;
  EXPECT_NE(contract_unavailable(none).find("lists no weights"), std::string::npos);
  std::vector<calbin::GoldenCase*> cases;
  std::vector<calbin::GoldenCase> fp32;
  const auto added = add_calbin_references("nowhere", none, cases, fp32, 1);
  ASSERT_FALSE(added.has_value());
  EXPECT_NE(added.error().to_string().find("lists no weights"), std::string::npos);
}

TEST(CalbinReferences, AGoldenCaseWithTooFewGreedyTokensIsNamed) {
  const auto manifest = calbin::read_manifest(testing::tiny_calbin());
  auto golden = calbin::read_golden(testing::tiny_calbin() / "golden");
  ASSERT_TRUE(golden.has_value());
  calbin::GoldenCase short_case = golden->cases.front();
  short_case.greedy.resize(2);
  std::vector<calbin::GoldenCase*> cases{&short_case};
  std::vector<calbin::GoldenCase> fp32(1);
  const auto added = add_calbin_references(testing::tiny_calbin(), *manifest, cases, fp32, 1);
  ASSERT_FALSE(added.has_value());
  EXPECT_NE(added.error().to_string().find(short_case.name), std::string::npos)
      << added.error().to_string();
}

}  // namespace
}  // namespace simdev::gen
