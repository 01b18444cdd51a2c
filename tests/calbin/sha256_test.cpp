// SHA-256 against the FIPS 180-2 test vectors.
#include <gtest/gtest.h>

#include "calbin/sha256.hpp"
#include "test_util.hpp"

namespace calbin {
namespace {

std::string hash_of(std::string_view text) {
  return sha256_hex(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(hash_of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hash_of(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hash_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, FileSpanningSeveralChunksMatchesInMemoryDigest) {
  testing::TempDir dir;
  // One million 'a's is the FIPS long vector; add more so the file crosses a 1 MiB chunk.
  const std::string million(1000000, 'a');
  testing::write_text(dir / "a.bin", million);
  const Result<std::string> digest = sha256_file(dir / "a.bin");
  ASSERT_TRUE(digest) << digest.error().to_string();
  EXPECT_EQ(*digest, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

  const std::string big(3 * (1 << 20) + 17, 'x');
  testing::write_text(dir / "big.bin", big);
  const Result<std::string> big_digest = sha256_file(dir / "big.bin");
  ASSERT_TRUE(big_digest);
  EXPECT_EQ(*big_digest, hash_of(big));
}

TEST(Sha256, MissingFileIsAnErrorNamingIt) {
  testing::TempDir dir;
  const Result<std::string> digest = sha256_file(dir / "nope.bin");
  ASSERT_FALSE(digest);
  EXPECT_NE(digest.error().file.find("nope.bin"), std::string::npos);
}

}  // namespace
}  // namespace calbin
