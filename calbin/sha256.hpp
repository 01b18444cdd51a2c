// SHA-256 through OpenSSL's EVP interface.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "calbin/result.hpp"

namespace calbin {

// Lowercase hex digest of bytes.
std::string sha256_hex(std::span<const uint8_t> bytes);
// Lowercase hex digest of a file, read in bounded chunks.
Result<std::string> sha256_file(const std::filesystem::path& path);

}  // namespace calbin
