// --shard I/N: parsing, and the partition it makes (disjoint, covering).
#include "runner/core/report/shard.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace runner {
namespace {

TEST(Shard, ParsesIOverN) {
  const auto shard = parse_shard("2/5");
  ASSERT_TRUE(shard);
  EXPECT_EQ(shard->index, 2u);
  EXPECT_EQ(shard->count, 5u);
  EXPECT_TRUE(parse_shard("0/1"));
}

TEST(Shard, RefusesWhatIsNotAShard) {
  for (const char* text : {"", "1", "1/1", "3/2", "0/0", "a/2", "1/", "/2", "-1/2", "0/2/3",
                           "0/100001", "1 /2", "0x1/2"}) {
    std::string why;
    EXPECT_FALSE(parse_shard(text, &why)) << text;
    EXPECT_NE(why.find(std::string("'") + text + "'"), std::string::npos) << why;
  }
}

TEST(Shard, ShardsAreDisjointAndCoverTheRun) {
  for (const uint32_t count : {1u, 2u, 3u, 7u}) {
    std::vector<int> owners(50, 0);
    for (uint32_t index = 0; index < count; ++index) {
      const Shard shard{index, count};
      for (size_t unit = 0; unit < owners.size(); ++unit) owners[unit] += shard.owns(unit);
    }
    for (size_t unit = 0; unit < owners.size(); ++unit) {
      EXPECT_EQ(owners[unit], 1) << "unit " << unit << " of " << count << " shards";
    }
  }
}

}  // namespace
}  // namespace runner
