// The examples in calbin/FORMAT.md parse, so the documentation cannot drift from the reader.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "calbin/manifest.hpp"
#include "test_util.hpp"

namespace calbin {
namespace {

std::vector<std::string> json_blocks(const std::string& markdown) {
  std::vector<std::string> blocks;
  const std::string open = "```json\n";
  for (size_t at = markdown.find(open); at != std::string::npos; at = markdown.find(open, at)) {
    at += open.size();
    const size_t end = markdown.find("```", at);
    if (end == std::string::npos) {
      break;
    }
    blocks.push_back(markdown.substr(at, end - at));
  }
  return blocks;
}

TEST(FormatDoc, ExampleManifestParsesAndMatchesTheText) {
  const std::vector<std::string> blocks = json_blocks(testing::read_text(CALBIN_FORMAT_MD));
  ASSERT_EQ(blocks.size(), 2u) << "FORMAT.md should hold the manifest and golden examples";
  const Result<Manifest> manifest = parse_manifest(blocks[0], "FORMAT.md");
  ASSERT_TRUE(manifest) << manifest.error().to_string();
  EXPECT_EQ(manifest->device_memory_required.bytes(), uint64_t{12} << 20);
  ASSERT_EQ(manifest->models.size(), 1u);
  EXPECT_EQ(manifest->models[0].outputs[0].layout.tile_d0, 16u);
  EXPECT_TRUE(nlohmann::json::accept(blocks[1]));
}

}  // namespace
}  // namespace calbin
