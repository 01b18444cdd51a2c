// codec.hpp: how bytes that cross the ABI boundary are written into a call recording: input
// tensors as base64 (replayed byte for byte), output tensors as a SHA-256 (compared).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace calrt::validate {

std::string base64_encode(std::span<const unsigned char> bytes);
// nullopt when `text` is not base64 (wrong length or alphabet).
std::optional<std::vector<unsigned char>> base64_decode(std::string_view text);
// Lower-case hex SHA-256.
std::string sha256_hex(std::span<const unsigned char> bytes);

}  // namespace calrt::validate
