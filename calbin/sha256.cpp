// SHA-256 through OpenSSL's EVP interface; files are hashed in bounded chunks so that a
// multi-gigabyte parameter block never needs to fit in memory.
#include "calbin/sha256.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>
#include <vector>

namespace calbin {
namespace {

constexpr size_t kChunkBytes = size_t{1} << 20;

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

std::string to_hex(const unsigned char* digest, unsigned int length) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  text.reserve(size_t{length} * 2);
  for (unsigned int i = 0; i < length; ++i) {
    text += kHex[digest[i] >> 4];
    text += kHex[digest[i] & 0xF];
  }
  return text;
}

MdCtx new_sha256() {
  MdCtx ctx(EVP_MD_CTX_new());
  if (ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    ctx.reset();
  }
  return ctx;
}

std::string finish(EVP_MD_CTX* ctx) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx, digest.data(), &length) != 1) {
    return {};
  }
  return to_hex(digest.data(), length);
}

}  // namespace

// An empty string signals an OpenSSL failure; it can never equal a real 64-digit digest.
std::string sha256_hex(std::span<const uint8_t> bytes) {
  MdCtx ctx = new_sha256();
  if (!ctx || EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) != 1) {
    return {};
  }
  return finish(ctx.get());
}

Result<std::string> sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(path.string(), "", "cannot open for reading");
  }
  MdCtx ctx = new_sha256();
  if (!ctx) {
    return fail(path.string(), "", "OpenSSL SHA-256 initialisation failed");
  }
  // Sized to the file and left uninitialised: a calbin load hashes every file, and a zeroed
  // 1 MiB buffer per small file was most of a load's time (a fresh mmap each time under
  // AddressSanitizer).
  std::error_code size_error;
  const uintmax_t file_bytes = std::filesystem::file_size(path, size_error);
  const size_t chunk_bytes =
      size_error ? kChunkBytes
                 : static_cast<size_t>(std::clamp<uintmax_t>(file_bytes, 1, kChunkBytes));
  const auto chunk = std::make_unique_for_overwrite<char[]>(chunk_bytes);
  while (in) {
    in.read(chunk.get(), static_cast<std::streamsize>(chunk_bytes));
    const auto count = static_cast<size_t>(in.gcount());
    if (count > 0 && EVP_DigestUpdate(ctx.get(), chunk.get(), count) != 1) {
      return fail(path.string(), "", "OpenSSL SHA-256 update failed");
    }
  }
  if (in.bad()) {
    return fail(path.string(), "", "read error");
  }
  const std::string digest = finish(ctx.get());
  if (digest.empty()) {
    return fail(path.string(), "", "OpenSSL SHA-256 finalisation failed");
  }
  return digest;
}

}  // namespace calbin
