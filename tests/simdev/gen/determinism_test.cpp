#include <fstream>
#include <iterator>
#include <vector>

#include <gtest/gtest.h>

#include "calbin/manifest.hpp"
#include "gen_fixture.hpp"

namespace simdev::gen {
namespace {

std::vector<char> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Determinism, SameSeedGivesByteIdenticalFiles) {
  const GenOptions options = testing::tiny_options("tiny-seed1-again", 1);
  const auto again = generate(options);
  ASSERT_TRUE(again.has_value()) << again.error().to_string();
  const std::filesystem::path& first = testing::tiny_calbin();
  std::vector<std::string> paths = {"manifest.json"};
  for (const calbin::FileEntry& file : again->files) {
    paths.push_back(file.path);
  }
  EXPECT_GT(paths.size(), 10u);
  for (const std::string& path : paths) {
    const std::vector<char> a = file_bytes(first / path);
    EXPECT_FALSE(a.empty()) << path;
    EXPECT_EQ(a, file_bytes(options.out_dir / path)) << path;
  }
}

TEST(Determinism, DifferentSeedGivesDifferentWeightsAndPrompts) {
  const GenOptions options = testing::tiny_options("tiny-seed2", 2);
  const auto other = generate(options);
  ASSERT_TRUE(other.has_value()) << other.error().to_string();
  for (const char* path : {"param_blk0.bin", "param_blk1.bin", "param_blk2.bin",
                           "golden/len17.tokens.npy", "golden/len17.prefill_logits.npy"}) {
    const auto a = file_bytes(testing::tiny_calbin() / path);
    const auto b = file_bytes(options.out_dir / path);
    EXPECT_EQ(a.size(), b.size()) << path;
    EXPECT_NE(a, b) << path;
  }
}

}  // namespace
}  // namespace simdev::gen
