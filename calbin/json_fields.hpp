// Internal to the calbin library: typed access to parsed JSON that names the field path and
// the offending value in every error. Shared by the manifest and golden-index readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "calbin/field_error.hpp"

namespace calbin::detail {

using Json = nlohmann::json;

// Nesting deeper than any calbin document needs; bounds the parser's memory on hostile input.
inline constexpr int kMaxJsonDepth = 64;

std::string join(std::string_view path, std::string_view key);
std::string join(std::string_view path, size_t index);
// A short rendering of a value for error messages (long values are cut).
std::string describe(const Json& value);
std::string quote(std::string_view text);

// Parses text with a nesting limit; malformed text throws a FieldError with line and column.
Json parse_json_text(std::string_view text);

uint64_t as_u64(const Json& value, const std::string& field);
uint32_t as_u32(const Json& value, const std::string& field);
int as_int(const Json& value, const std::string& field);
int64_t as_dim(const Json& value, const std::string& field);
double as_double(const Json& value, const std::string& field);
bool as_bool(const Json& value, const std::string& field);
std::string as_string(const Json& value, const std::string& field);
const Json& as_array(const Json& value, const std::string& field);

// A JSON object at a known field path. Getters without a fallback require the key.
class Fields {
 public:
  Fields(const Json& value, std::string path);

  const std::string& path() const { return path_; }
  std::string at(std::string_view key) const { return join(path_, key); }
  bool has(std::string_view key) const;
  const Json& require(std::string_view key) const;

  uint64_t u64(std::string_view key) const;
  uint64_t u64(std::string_view key, uint64_t fallback) const;
  uint32_t u32(std::string_view key) const;
  uint32_t u32(std::string_view key, uint32_t fallback) const;
  int i32(std::string_view key) const;
  int i32(std::string_view key, int fallback) const;
  double f64(std::string_view key) const;
  double f64(std::string_view key, double fallback) const;
  bool boolean(std::string_view key, bool fallback) const;
  std::string str(std::string_view key) const;
  std::string str(std::string_view key, std::string fallback) const;
  Fields object(std::string_view key) const;
  // The array under key; an absent optional array reads as empty.
  const Json& array(std::string_view key) const;
  const Json& array_or_empty(std::string_view key) const;

 private:
  const Json& value_;
  std::string path_;
};

}  // namespace calbin::detail
