#include "simdev/service/server/access/tcp_token.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "simdev/service/server/access/file_mode.hpp"

namespace simdev::service::server {
tl::expected<TokenDigest, std::string> read_token_file(const std::string& path) {
  const std::string where = "--token-file " + path + ": ";
  // O_NOFOLLOW: a link planted in place of the file is refused, not followed.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    return tl::unexpected(where + std::strerror(errno));
  }
  struct stat st {};
  std::string text;
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (st.st_uid != ::geteuid()) {
    problem = "owned by uid " + std::to_string(st.st_uid) + ", not by the daemon's uid " +
              std::to_string(::geteuid());
  } else if ((st.st_mode & 077) != 0) {
    problem = "mode " + mode_text(st.st_mode) + " lets other users read it (chmod 600)";
  } else if (st.st_size > static_cast<off_t>(kMaxTokenFileBytes)) {
    problem = std::to_string(st.st_size) + " bytes, more than a token file's " +
              std::to_string(kMaxTokenFileBytes);
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        problem = n < 0 ? std::strerror(errno) : "shorter than its size";
        break;
      }
      got += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!problem.empty()) {
    return tl::unexpected(where + problem);
  }
  const std::string token = text.substr(0, text.find_first_of("\r\n"));
  if (token.size() < kMinTokenChars) {
    return tl::unexpected(where + "its first line has " + std::to_string(token.size()) +
                          " characters; a token needs at least " + std::to_string(kMinTokenChars) +
                          " (e.g. `head -c 24 /dev/urandom | base64 > FILE`)");
  }
  return token_digest(token);
}

TokenDigest token_digest(std::string_view token) {
  TokenDigest digest;
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest.bytes.data());
  return digest;
}

bool token_matches(const TokenDigest& expected, std::string_view offered) {
  const TokenDigest got = token_digest(offered);
  return CRYPTO_memcmp(expected.bytes.data(), got.bytes.data(), expected.bytes.size()) == 0;
}

}  // namespace simdev::service::server
