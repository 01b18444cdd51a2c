// Whole-file reads with a size bound, and atomic writes: the calbin library's, and the
// generator's for the files it reads (simdev/gen/config_file.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "calbin/result.hpp"

namespace calbin::detail {

// Reads a whole file, refusing files larger than max_bytes before allocating for them.
Result<std::string> read_file_bounded(const std::filesystem::path& path, uint64_t max_bytes);

// Writes bytes to a temporary file in the target's directory, flushes it to disk and renames
// it over the target, so readers see the old file or the new one, never a torn one.
Result<void> write_file_atomic(const std::filesystem::path& path, std::span<const uint8_t> bytes);
Result<void> write_file_atomic(const std::filesystem::path& path, std::string_view text);

}  // namespace calbin::detail
