// verify_files and resolve_inside: sizes, hashes, missing files and paths leaving the calbin.
#include <gtest/gtest.h>

#include "calbin/sha256.hpp"
#include "test_util.hpp"

namespace calbin {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_text;

std::string sha256_text(const std::string& text) {
  return sha256_hex(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// A calbin dir with two listed files; the test then breaks one thing.
class VerifyFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "golden");
    add("param_blk0.bin", std::string(1000, 'p'));
    add("golden/golden.json", "{}");
  }
  void add(const std::string& path, const std::string& content) {
    write_text(dir_ / path, content);
    manifest_.files.push_back(FileEntry{path, content.size(), sha256_text(content)});
  }
  std::string error_text() {
    const Result<void> verified = verify_files(dir_.path(), manifest_);
    EXPECT_FALSE(verified) << "verification passed but should have failed";
    return verified ? "" : verified.error().to_string();
  }

  TempDir dir_;
  Manifest manifest_;
};

TEST_F(VerifyFiles, IntactFilesPass) {
  const Result<void> verified = verify_files(dir_.path(), manifest_);
  EXPECT_TRUE(verified) << verified.error().to_string();
}

TEST_F(VerifyFiles, SizeMismatchNamesFileAndBothSizes) {
  add("param_blk1.bin", std::string(1000, 'q'));
  manifest_.files[2].size = 2048;
  EXPECT_EQ(error_text(), "param_blk1.bin: size 1000 but manifest.json files[2].size says 2048");
}

TEST_F(VerifyFiles, HashMismatchNamesFileAndBothDigests) {
  const std::string actual = manifest_.files[0].sha256;
  manifest_.files[0].sha256 = std::string(64, 'd');
  EXPECT_EQ(error_text(), "param_blk0.bin: sha256 " + actual +
                              " but manifest.json files[0].sha256 says " + std::string(64, 'd'));
}

TEST_F(VerifyFiles, MissingFile) {
  manifest_.files.push_back(FileEntry{"param_blk9.bin", 1, std::string(64, '0')});
  const std::string text = error_text();
  EXPECT_NE(text.find("param_blk9.bin: missing"), std::string::npos) << text;
  EXPECT_NE(text.find("files[2]"), std::string::npos) << text;
}

TEST_F(VerifyFiles, DirectoryIsNotARegularFile) {
  manifest_.files.push_back(FileEntry{"golden", 0, std::string(64, '0')});
  EXPECT_NE(error_text().find("golden: not a regular file"), std::string::npos);
}

TEST_F(VerifyFiles, DotDotPathIsRefused) {
  write_text(dir_.path().parent_path() / "outside.bin", "x");
  manifest_.files.push_back(FileEntry{"../outside.bin", 1, sha256_text("x")});
  const std::string text = error_text();
  EXPECT_NE(text.find("../outside.bin"), std::string::npos) << text;
  EXPECT_NE(text.find("\"..\""), std::string::npos) << text;
  fs::remove(dir_.path().parent_path() / "outside.bin");
}

TEST_F(VerifyFiles, AbsolutePathIsRefused) {
  manifest_.files.push_back(
      FileEntry{(dir_ / "param_blk0.bin").string(), 1000, manifest_.files[0].sha256});
  EXPECT_NE(error_text().find("absolute path"), std::string::npos);
}

TEST_F(VerifyFiles, SymlinkPointingOutsideIsRefused) {
  TempDir outside;
  write_text(outside / "secret.bin", "s");
  fs::create_symlink(outside / "secret.bin", dir_ / "link.bin");
  manifest_.files.push_back(FileEntry{"link.bin", 1, sha256_text("s")});
  const std::string text = error_text();
  EXPECT_NE(text.find("outside the calbin directory"), std::string::npos) << text;
}

TEST_F(VerifyFiles, SymlinkedDirectoryPointingOutsideIsRefused) {
  TempDir outside;
  write_text(outside / "secret.bin", "s");
  fs::create_directory_symlink(outside.path(), dir_ / "sub");
  manifest_.files.push_back(FileEntry{"sub/secret.bin", 1, sha256_text("s")});
  EXPECT_NE(error_text().find("outside the calbin directory"), std::string::npos);
}

TEST_F(VerifyFiles, SymlinkInsideTheDirectoryIsFine) {
  fs::create_symlink("param_blk0.bin", dir_ / "alias.bin");
  manifest_.files.push_back(FileEntry{"alias.bin", 1000, manifest_.files[0].sha256});
  const Result<void> verified = verify_files(dir_.path(), manifest_);
  EXPECT_TRUE(verified) << verified.error().to_string();
}

TEST_F(VerifyFiles, DanglingSymlinkIsRefused) {
  fs::create_symlink("/nonexistent/calbin/target.bin", dir_ / "dangling.bin");
  manifest_.files.push_back(FileEntry{"dangling.bin", 1, std::string(64, '0')});
  EXPECT_NE(error_text().find("dangling symlink"), std::string::npos);
}

TEST(ResolveInside, AcceptsNestedRelativePaths) {
  TempDir dir;
  const Result<fs::path> resolved = resolve_inside(dir.path(), "golden/len17.tokens.npy");
  ASSERT_TRUE(resolved) << resolved.error().to_string();
  EXPECT_EQ(*resolved, dir.path() / "golden/len17.tokens.npy");
}

TEST(ResolveInside, RefusesEscapes) {
  TempDir dir;
  for (const char* path : {"", "/etc/passwd", "..", "../x", "a/../../x", "a/.."}) {
    const Result<fs::path> resolved = resolve_inside(dir.path(), path);
    EXPECT_FALSE(resolved) << "accepted \"" << path << "\"";
  }
  EXPECT_FALSE(resolve_inside(dir.path(), std::string_view("a\0b", 3)));
}

}  // namespace
}  // namespace calbin
