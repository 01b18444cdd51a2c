// Golden sets: round trip, and shape mismatches named by .npy file and field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "calbin/golden.hpp"
#include "calbin/npy.hpp"
#include "test_util.hpp"

namespace calbin {
namespace {

using testing::TempDir;

GoldenCase make_case(const std::string& name, uint32_t prompt_len, uint32_t steps, uint32_t vocab,
                     uint32_t top_k, bool with_decode_logits) {
  GoldenCase c;
  c.name = name;
  c.prompt_len = prompt_len;
  c.decode_steps = steps;
  c.long_case = prompt_len > 4000;
  for (uint32_t i = 0; i < prompt_len; ++i) {
    c.tokens.push_back(static_cast<int32_t>(i % vocab));
  }
  for (uint32_t i = 0; i < vocab; ++i) {
    c.prefill_logits.push_back(static_cast<float>(i) * 0.5f - 3.0f);
  }
  for (uint32_t i = 0; i <= steps; ++i) {
    c.greedy.push_back(static_cast<int32_t>((i * 3) % vocab));
  }
  for (uint32_t i = 0; i < steps * top_k; ++i) {
    c.top_ids.push_back(static_cast<int32_t>(i % vocab));
    c.top_logits.push_back(10.0f - static_cast<float>(i));
  }
  if (with_decode_logits) {
    c.decode_logits.assign(size_t{steps} * vocab, 0.25f);
  }
  return c;
}

GoldenSet sample_set() {
  GoldenSet set;
  set.vocab = 32;
  set.top_k = 4;
  set.reference = "fp32 unsplit";
  set.cases = {make_case("len1", 1, 3, 32, 4, true), make_case("len17", 17, 5, 32, 4, false)};
  return set;
}

TEST(Golden, RoundTrip) {
  TempDir dir;
  const GoldenSet set = sample_set();
  const Result<std::vector<std::string>> written = write_golden(dir / "golden", set);
  ASSERT_TRUE(written) << written.error().to_string();
  EXPECT_EQ(written->size(), 6u + 5u + 1u);
  EXPECT_EQ(written->back(), "golden.json");
  EXPECT_NE(std::find(written->begin(), written->end(), "len17.tokens.npy"), written->end());

  const Result<GoldenSet> read = read_golden(dir / "golden");
  ASSERT_TRUE(read) << read.error().to_string();
  EXPECT_EQ(read->vocab, set.vocab);
  EXPECT_EQ(read->top_k, set.top_k);
  EXPECT_EQ(read->reference, set.reference);
  ASSERT_EQ(read->cases.size(), 2u);
  for (size_t i = 0; i < set.cases.size(); ++i) {
    const GoldenCase& want = set.cases[i];
    const GoldenCase& got = read->cases[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.prompt_len, want.prompt_len);
    EXPECT_EQ(got.decode_steps, want.decode_steps);
    EXPECT_EQ(got.long_case, want.long_case);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.prefill_logits, want.prefill_logits);
    EXPECT_EQ(got.greedy, want.greedy);
    EXPECT_EQ(got.top_ids, want.top_ids);
    EXPECT_EQ(got.top_logits, want.top_logits);
    EXPECT_EQ(got.decode_logits, want.decode_logits);
  }
}

TEST(Golden, ShapeMismatchNamesTheNpyFileAndField) {
  TempDir dir;
  ASSERT_TRUE(write_golden(dir.path(), sample_set()));
  // Replace len17's prompt with one token too few.
  ASSERT_TRUE(write_npy_i32(dir / "len17.tokens.npy", {16}, std::vector<int32_t>(16, 1)));
  const Result<GoldenSet> read = read_golden(dir.path());
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().file, (dir / "len17.tokens.npy").string());
  EXPECT_EQ(read.error().field, "cases[1].tokens");
  EXPECT_NE(read.error().message.find("shape [16] but the case needs [17] [prompt_len]"),
            std::string::npos)
      << read.error().message;
}

TEST(Golden, RankMismatchOfTopIds) {
  TempDir dir;
  ASSERT_TRUE(write_golden(dir.path(), sample_set()));
  ASSERT_TRUE(write_npy_i32(dir / "len1.top_ids.npy", {12}, std::vector<int32_t>(12, 0)));
  const Result<GoldenSet> read = read_golden(dir.path());
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().field, "cases[0].top_ids");
  EXPECT_NE(read.error().message.find("[12] but the case needs [3, 4]"), std::string::npos);
}

TEST(Golden, WrongDtypeIsRefused) {
  TempDir dir;
  ASSERT_TRUE(write_golden(dir.path(), sample_set()));
  ASSERT_TRUE(write_npy_f32(dir / "len1.greedy.npy", {4}, {0, 1, 2, 3}));
  const Result<GoldenSet> read = read_golden(dir.path());
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().file, (dir / "len1.greedy.npy").string());
  EXPECT_EQ(read.error().field, "descr");
}

// Rewrites golden.json after `mutate` and returns read_golden's error.
Error index_error(const TempDir& dir, const std::function<void(nlohmann::json&)>& mutate) {
  EXPECT_TRUE(write_golden(dir.path(), sample_set()));
  nlohmann::json index = nlohmann::json::parse(testing::read_text(dir / "golden.json"));
  mutate(index);
  testing::write_text(dir / "golden.json", index.dump());
  const Result<GoldenSet> read = read_golden(dir.path());
  EXPECT_FALSE(read);
  return read ? Error{} : read.error();
}

TEST(Golden, ArrayPathsMustStayInside) {
  TempDir dir;
  const Error error = index_error(
      dir, [](nlohmann::json& index) { index["cases"][0]["prefill_logits"] = "../elsewhere.npy"; });
  EXPECT_EQ(error.file, (dir / "golden.json").string());
  EXPECT_EQ(error.field, "cases[0].prefill_logits");
  EXPECT_NE(error.message.find("\"../elsewhere.npy\""), std::string::npos) << error.message;
}

TEST(Golden, IndexErrorsNameTheField) {
  TempDir dir;
  Error error = index_error(dir, [](nlohmann::json& index) { index["cases"][1].erase("greedy"); });
  EXPECT_EQ(error.field, "cases[1].greedy");
  EXPECT_NE(error.message.find("missing required field"), std::string::npos);
  error = index_error(dir, [](nlohmann::json& index) { index["schema"] = 7; });
  EXPECT_EQ(error.field, "schema");
  error = index_error(dir, [](nlohmann::json& index) { index["vocab"] = -1; });
  EXPECT_EQ(error.field, "vocab");
  EXPECT_NE(error.message.find("negative value -1"), std::string::npos);
}

// Accepted before: the second case of a name shadowed the first in `--cases` and reports.
TEST(Golden, DuplicateCaseNamesAreRefused) {
  TempDir dir;
  const Error error = index_error(
      dir, [](nlohmann::json& index) { index["cases"][1]["name"] = index["cases"][0]["name"]; });
  EXPECT_EQ(error.field, "cases[1].name");
  EXPECT_NE(error.message.find("is also the name of cases[0]"), std::string::npos) << error.message;
}

TEST(Golden, MissingArrayFile) {
  TempDir dir;
  ASSERT_TRUE(write_golden(dir.path(), sample_set()));
  std::filesystem::remove(dir / "len1.decode_logits.npy");
  const Result<GoldenSet> read = read_golden(dir.path());
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().to_string().find("len1.decode_logits.npy"), std::string::npos);
}

TEST(Golden, WriterRefusesInconsistentCases) {
  TempDir dir;
  GoldenSet set = sample_set();
  set.cases[1].greedy.pop_back();
  Result<std::vector<std::string>> written = write_golden(dir.path(), set);
  ASSERT_FALSE(written);
  EXPECT_EQ(written.error().field, "cases[1].greedy");
  EXPECT_NE(written.error().message.find("holds 5 values but decode_steps + 1 needs 6"),
            std::string::npos)
      << written.error().message;
  EXPECT_FALSE(std::filesystem::exists(dir / "golden.json"));

  set = sample_set();
  set.cases[1].name = "len1";
  written = write_golden(dir.path(), set);
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().message.find("duplicate case name \"len1\""), std::string::npos);

  set = sample_set();
  set.cases[0].name = "../escape";
  written = write_golden(dir.path(), set);
  ASSERT_FALSE(written);
  EXPECT_EQ(written.error().field, "cases[0].name");
}

}  // namespace
}  // namespace calbin

namespace calbin {
namespace {

// sample_set() with contract rows on len17: its last prompt token and each decode step.
GoldenSet contract_set() {
  GoldenSet set = sample_set();
  set.contract_reference = "device contract";
  GoldenCase& c = set.cases[1];
  for (int32_t row = 16; row < 17 + 5; ++row) {
    c.contract_rows.push_back(row);
    for (uint32_t v = 0; v < set.vocab; ++v)
      c.contract_logits.push_back(float(row) + 0.5f * float(v));
  }
  return set;
}

TEST(GoldenContract, RoundTripsAsSchema2) {
  TempDir dir;
  const GoldenSet set = contract_set();
  ASSERT_TRUE(write_golden(dir.path(), set));
  const nlohmann::json index = nlohmann::json::parse(testing::read_text(dir / "golden.json"));
  EXPECT_EQ(index["schema"], 2);
  EXPECT_FALSE(index["cases"][0].contains("contract_rows"));  // a case may have none
  const Result<GoldenSet> read = read_golden(dir.path());
  ASSERT_TRUE(read) << read.error().to_string();
  EXPECT_EQ(read->contract_reference, "device contract");
  EXPECT_TRUE(read->cases[0].contract_rows.empty());
  EXPECT_EQ(read->cases[1].contract_rows, set.cases[1].contract_rows);
  EXPECT_EQ(read->cases[1].contract_logits, set.cases[1].contract_logits);
}

// A set without contract rows is written as schema 1, which older readers accept.
TEST(GoldenContract, ASetWithoutContractRowsStaysSchema1) {
  TempDir dir;
  ASSERT_TRUE(write_golden(dir.path(), sample_set()));
  const nlohmann::json index = nlohmann::json::parse(testing::read_text(dir / "golden.json"));
  EXPECT_EQ(index["schema"], 1);
  EXPECT_FALSE(index.contains("contract_reference"));
}

Error contract_error(const TempDir& dir, const std::function<void()>& damage) {
  EXPECT_TRUE(write_golden(dir.path(), contract_set()));
  damage();
  const Result<GoldenSet> read = read_golden(dir.path());
  EXPECT_FALSE(read);
  return read ? Error{} : read.error();
}

TEST(GoldenContract, RowsMustIncreaseAndStayInsideTheCase) {
  TempDir dir;
  Error error = contract_error(dir, [&] {
    ASSERT_TRUE(write_npy_i32(dir / "len17.contract_rows.npy", {6}, {16, 17, 17, 19, 20, 21}));
  });
  EXPECT_EQ(error.field, "cases[1].contract_rows[2]");
  EXPECT_NE(error.message.find("17 is not an increasing token index"), std::string::npos)
      << error.message;
  error = contract_error(dir, [&] {
    ASSERT_TRUE(write_npy_i32(dir / "len17.contract_rows.npy", {6}, {16, 17, 18, 19, 20, 22}));
  });
  EXPECT_EQ(error.field, "cases[1].contract_rows[5]");
  EXPECT_NE(error.message.find("below prompt_len + decode_steps = 22"), std::string::npos)
      << error.message;
}

TEST(GoldenContract, RowsMustBeOneDimensionalAndStayInside) {
  TempDir dir;
  Error error = contract_error(dir, [&] {
    ASSERT_TRUE(write_npy_i32(dir / "len17.contract_rows.npy", {2, 3}, {16, 17, 18, 19, 20, 21}));
  });
  EXPECT_EQ(error.field, "cases[1].contract_rows");
  EXPECT_NE(error.message.find("shape [2, 3] but the rows are a 1-D array"), std::string::npos)
      << error.message;
  error = contract_error(dir, [&] {
    nlohmann::json index = nlohmann::json::parse(testing::read_text(dir / "golden.json"));
    index["cases"][1]["contract_probes"] = "../outside.npy";
    testing::write_text(dir / "golden.json", index.dump());
  });
  EXPECT_EQ(error.field, "cases[1].contract_probes");
  EXPECT_NE(error.message.find("\"../outside.npy\""), std::string::npos) << error.message;
}

TEST(GoldenContract, LogitsMustHaveARowPerContractRow) {
  TempDir dir;
  const Error error = contract_error(dir, [&] {
    ASSERT_TRUE(write_npy_f32(dir / "len17.contract_logits.npy", {5, 32},
                              std::vector<float>(5 * 32, 1.0f)));
  });
  EXPECT_EQ(error.field, "cases[1].contract_logits");
  EXPECT_NE(error.message.find("shape [5, 32] but the case needs [6, 32]"), std::string::npos)
      << error.message;
}

TEST(GoldenContract, RowsWithoutLogitsAreRefused) {
  TempDir dir;
  const Error error = contract_error(dir, [&] {
    nlohmann::json index = nlohmann::json::parse(testing::read_text(dir / "golden.json"));
    index["cases"][1].erase("contract_logits");
    testing::write_text(dir / "golden.json", index.dump());
  });
  EXPECT_EQ(error.field, "cases[1]");
  EXPECT_NE(error.message.find("come together"), std::string::npos) << error.message;
}

TEST(GoldenContract, ProbesRoundTripWithTheirShape) {
  TempDir dir;
  GoldenSet set = contract_set();
  GoldenCase& c = set.cases[1];
  c.probe_points = 3;
  c.probe_width = 4;
  for (size_t i = 0; i < c.contract_rows.size() * 3 * 4; ++i) {
    c.contract_probes.push_back(static_cast<float>(i) * 0.25f);
  }
  ASSERT_TRUE(write_golden(dir.path(), set));
  const Result<GoldenSet> read = read_golden(dir.path());
  ASSERT_TRUE(read) << read.error().to_string();
  EXPECT_EQ(read->cases[1].contract_probes, c.contract_probes);
  EXPECT_EQ(read->cases[1].probe_points, 3u);
  EXPECT_EQ(read->cases[1].probe_width, 4u);
  EXPECT_TRUE(read->cases[0].contract_probes.empty());

  ASSERT_TRUE(write_npy_f32(dir / "len17.contract_probes.npy", {5, 3, 4},
                            std::vector<float>(5 * 3 * 4, 0.0f)));
  const Result<GoldenSet> wrong = read_golden(dir.path());
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().field, "cases[1].contract_probes");
  EXPECT_NE(wrong.error().message.find("shape [5, 3, 4] but the case needs [6, points, hidden]"),
            std::string::npos)
      << wrong.error().message;
}

TEST(GoldenContract, WriterRefusesRowsOutOfOrder) {
  TempDir dir;
  GoldenSet set = contract_set();
  std::swap(set.cases[1].contract_rows[0], set.cases[1].contract_rows[1]);
  const auto written = write_golden(dir.path(), set);
  ASSERT_FALSE(written);
  EXPECT_EQ(written.error().field, "cases[1].contract_rows[1]");
}

}  // namespace
}  // namespace calbin
