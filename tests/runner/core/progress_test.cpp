// The progress line: its text (count, item, rate, time left), nothing written when disabled
// (not a terminal, or --quiet), and erased when done.
#include "runner/core/report/progress.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace runner {
namespace {

std::string contents(std::FILE* file) {
  std::rewind(file);
  std::string text;
  for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file))
    text.push_back(static_cast<char>(c));
  return text;
}

TEST(Progress, LineShowsCountItemRateAndTimeLeft) {
  Progress p("plans", 1000, false);
  EXPECT_EQ(p.line(0, 0.0, ""), "plans 0/1000");
  // 250 in 10 s: 25/s, 750 left: 30 s.
  EXPECT_EQ(p.line(250, 10.0, "plan 251"), "plans 250/1000 (plan 251)  25.0/s  ETA 30 s");
  // 10 in 10 s: 1/s, 990 left: 16 min 30 s.
  EXPECT_EQ(p.line(10, 10.0, ""), "plans 10/1000  1.0/s  ETA 16 min 30 s");
  EXPECT_EQ(p.line(1000, 40.0, ""), "plans 1000/1000  25.0/s  ETA 0 s");
}

TEST(Progress, DisabledWritesNothing) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  {
    Progress p("cases", 4, false, out);
    for (uint64_t i = 0; i <= 4; ++i) p.update(i, "len1");
  }
  EXPECT_EQ(contents(out), "");
  std::fclose(out);
}

TEST(Progress, EnabledDrawsInPlaceAndErasesWhenDone) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  {
    Progress p("cases", 2, true, out);
    p.update(0, "len1");
    p.update(2);  // the last update is always drawn, however soon
  }
  const std::string text = contents(out);
  EXPECT_EQ(text.rfind("\r\x1b[K"), text.size() - 4) << "not erased at the end: " << text;
  EXPECT_NE(text.find("\rcases 0/2 (len1)\x1b[K"), std::string::npos) << text;
  EXPECT_NE(text.find("\rcases 2/2"), std::string::npos) << text;
  EXPECT_EQ(text.find('\n'), std::string::npos) << "a progress line never adds lines";
  std::fclose(out);
}

}  // namespace
}  // namespace runner
