// The refused peers' warnings (server/access/refusal_log.hpp): one line per peer per quiet
// period, with the count of the refusals between, whatever the flood.
#include <gtest/gtest.h>

#include <string>

#include "simdev/service/server/access/refusal_log.hpp"

namespace {

using simdev::service::server::RefusalLog;
using namespace std::chrono_literals;

TEST(RefusalLog, AFloodOfOnePeerLogsOneLinePerQuietPeriodWithTheCount) {
  RefusalLog log(10s);
  const RefusalLog::Clock::time_point t0{};
  int lines = 0;
  for (int i = 0; i < 100000; ++i) {  // 100,000 refusals within 5 s
    if (log.note("uid 1001", "uid 1001 is not allowed", t0 + i * 50us)) ++lines;
  }
  EXPECT_EQ(lines, 1);
  const auto after = log.note("uid 1001", "uid 1001 is not allowed", t0 + 11s);
  ASSERT_TRUE(after.has_value());
  EXPECT_NE(after->find("and 99999 more refusals of uid 1001"), std::string::npos) << *after;
  // The count starts again.
  EXPECT_FALSE(log.note("uid 1001", "again", t0 + 12s).has_value());
}

TEST(RefusalLog, EachPeerHasItsOwnPeriodAndThePeersAreBounded) {
  RefusalLog log(10s);
  const RefusalLog::Clock::time_point t0{};
  EXPECT_TRUE(log.note("uid 1", "one", t0).has_value());
  EXPECT_TRUE(log.note("uid 2", "two", t0 + 1s).has_value());  // another peer is not silenced
  EXPECT_FALSE(log.note("uid 1", "one", t0 + 2s).has_value());
  // More peers than kept: the oldest is forgotten, so its next refusal is logged again.
  for (size_t i = 0; i < RefusalLog::kMaxPeers; ++i) {
    log.note("uid " + std::to_string(100 + i), "x", t0 + 3s);
  }
  EXPECT_TRUE(log.note("uid 1", "one", t0 + 4s).has_value());
}

}  // namespace
