#include "abi/validate/codec.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cstddef>

namespace calrt::validate {

std::string base64_encode(std::span<const unsigned char> bytes) {
  // EVP_EncodeBlock takes an int length; large tensors are encoded in chunks of whole
  // 3-byte groups so the pieces concatenate into one valid encoding.
  constexpr size_t kChunk = size_t{3} * 1024 * 1024;
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::string piece;
  for (size_t offset = 0; offset < bytes.size(); offset += kChunk) {
    const size_t n = std::min(kChunk, bytes.size() - offset);
    piece.resize((n + 2) / 3 * 4 + 1);
    const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(piece.data()),
                                        bytes.data() + offset, static_cast<int>(n));
    out.append(piece.data(), static_cast<size_t>(written));
  }
  return out;
}

std::optional<std::vector<unsigned char>> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return std::nullopt;
  }
  constexpr size_t kChunk = size_t{4} * 1024 * 1024;
  std::vector<unsigned char> out;
  out.reserve(text.size() / 4 * 3);
  std::vector<unsigned char> piece;
  for (size_t offset = 0; offset < text.size(); offset += kChunk) {
    const size_t n = std::min(kChunk, text.size() - offset);
    piece.resize(n / 4 * 3);
    const int got =
        EVP_DecodeBlock(piece.data(), reinterpret_cast<const unsigned char*>(text.data() + offset),
                        static_cast<int>(n));
    if (got < 0) {
      return std::nullopt;
    }
    // EVP_DecodeBlock counts the padding as zero bytes; only the last chunk can have any.
    size_t keep = static_cast<size_t>(got);
    if (offset + n == text.size()) {
      if (n >= 1 && text[offset + n - 1] == '=') {
        --keep;
      }
      if (n >= 2 && text[offset + n - 2] == '=') {
        --keep;
      }
    }
    out.insert(out.end(), piece.begin(), piece.begin() + static_cast<std::ptrdiff_t>(keep));
  }
  return out;
}

std::string sha256_hex(std::span<const unsigned char> bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(size_t{length} * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xF]);
  }
  return out;
}

}  // namespace calrt::validate
