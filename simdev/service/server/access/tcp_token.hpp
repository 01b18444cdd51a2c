// The secret a TCP client must present in its hello (PROTOCOL.md, "Security model"). A Unix
// socket has the kernel's peer credentials to say who connects; loopback TCP has nothing, so
// the daemon reads a token from --token-file at start, and only a client that can read that
// file can use the TCP port. The daemon keeps the token's SHA-256 only and compares digests
// in constant time, so neither the comparison's duration nor a differing length tells a
// guesser how much of a guess was right.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace simdev::service::server {

// Tokens shorter than this are refused at start: 16 random characters are beyond guessing
// over a socket.
inline constexpr size_t kMinTokenChars = 16;
inline constexpr size_t kMaxTokenFileBytes = 4096;

struct TokenDigest {
  std::array<unsigned char, 32> bytes{};
};

// Reads and checks the token file: a regular file (not a symbolic link) of the daemon's own
// uid, readable by nobody else (mode 0600 or narrower), of at most kMaxTokenFileBytes, whose
// first line holds at least kMinTokenChars characters. Errors name the path and the check,
// never the file's content.
tl::expected<TokenDigest, std::string> read_token_file(const std::string& path);

TokenDigest token_digest(std::string_view token);
// Constant time in the offered token's content (CRYPTO_memcmp over digests).
bool token_matches(const TokenDigest& expected, std::string_view offered);

}  // namespace simdev::service::server
