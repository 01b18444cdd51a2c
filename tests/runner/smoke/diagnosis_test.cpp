// runner/diagnosis: the consistency hints point at the value that is off.
#include <gtest/gtest.h>

#include "runner/core/report/report.hpp"
#include "runner/smoke/diagnosis.hpp"

namespace {

runner::Submission decode_step(uint64_t past, int32_t position, uint32_t fill) {
  runner::Submission s;
  s.case_name = "len17";
  s.phase = "decode step 0";
  s.cur_seq_len = 1;
  s.past_kv_cur_seq_len = past;
  s.first_position = position;
  s.last_position = position;
  s.sequence_tokens = 17;
  s.kv_capacity = 25;
  s.kv_fill_before = fill;
  return s;
}

bool contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& line : lines) {
    if (line.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

TEST(Diagnosis, ConsistentSubmissionHasNoHints) {
  EXPECT_TRUE(runner::consistency_hints(decode_step(17, 17, 17)).empty());
  EXPECT_TRUE(contains(runner::diagnose(decode_step(17, 17, 17), "cosine"), "suspect the device"));
}

TEST(Diagnosis, PastKvOffByOne) {
  const auto hints = runner::consistency_hints(decode_step(18, 17, 17));
  ASSERT_EQ(hints.size(), 1u);
  EXPECT_NE(hints[0].find("past_kv_cur_seq_len 18 != KV fill level 17"), std::string::npos);
  EXPECT_NE(hints[0].find("past_kv_cur_seq_len is the value that is off"), std::string::npos);
}

TEST(Diagnosis, PositionOffByOne) {
  const auto hints = runner::consistency_hints(decode_step(17, 18, 17));
  ASSERT_EQ(hints.size(), 1u);
  EXPECT_NE(hints[0].find("position 18 != past_kv_cur_seq_len 17"), std::string::npos);
}

TEST(Diagnosis, StaleKv) {
  const auto lines = runner::diagnose(decode_step(17, 17, 0), "cosine 0.5 < 0.995");
  EXPECT_TRUE(contains(lines, "case len17, decode step 0: cosine 0.5 < 0.995"));
  EXPECT_TRUE(contains(lines, "cur_seq_len=1 past_kv_cur_seq_len=17; positions 17..17"));
  EXPECT_TRUE(contains(lines, "capacity 25, fill level 0 before the job"));
  EXPECT_TRUE(contains(lines, "stale or wrong KV handle"));
}

TEST(Diagnosis, FillLevelAfterTheJob) {
  runner::Submission s = decode_step(17, 17, 17);
  s.kv_info_after = true;
  s.kv_fill_after = 17;
  EXPECT_TRUE(contains(runner::consistency_hints(s), "KV fill level 17 after the job != "));
}

TEST(Report, CountsTakeTheirNounsNumber) {
  EXPECT_EQ(runner::count_of(0, "case"), "0 cases");
  EXPECT_EQ(runner::count_of(1, "case"), "1 case");
  EXPECT_EQ(runner::count_of(2, "request"), "2 requests");
}

TEST(Report, JsonIsWrittenAtomically) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "report_test";
  std::filesystem::create_directories(dir);
  runner::Report report;
  report.command = "smoke";
  runner::StepResult step;
  step.number = 1;
  step.name = "device";
  report.steps.push_back(step);
  EXPECT_TRUE(report.passed());
  const auto path = dir / "r.json";
  EXPECT_EQ(runner::write_json_file(path, report.to_json()), "");
  EXPECT_TRUE(std::filesystem::exists(path));
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "r.json");  // no temporary left behind
  }
  EXPECT_NE(runner::write_json_file(dir / "missing" / "r.json", report.to_json()), "");
  report.steps[0].fail("broken");
  EXPECT_FALSE(report.passed());
  EXPECT_EQ(report.to_json()["result"], "FAIL");
}

}  // namespace
