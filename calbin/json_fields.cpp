// Typed JSON access with field paths in every error (see json_fields.hpp).
#include "calbin/json_fields.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace calbin::detail {
namespace {

constexpr size_t kMaxQuoted = 80;

std::string type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a number";
    default:
      return "an unsupported value";
  }
}

[[noreturn]] void wrong_type(const Json& value, const std::string& field, std::string_view want) {
  throw FieldError{
      field, "expected " + std::string(want) + ", got " + type_name(value) + " " + describe(value)};
}

// nlohmann reports a byte offset; people fix files by line and column.
std::string position_of(std::string_view text, size_t byte) {
  const size_t end = std::min(byte == 0 ? 0 : byte - 1, text.size());
  size_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(end - line_start + 1);
}

// Drops nlohmann's "[json.exception.out_of_range.406] " prefix.
std::string without_exception_id(const std::string& what) {
  const size_t at = what.find("] ");
  return at == std::string::npos ? what : what.substr(at + 2);
}

// Also drops "parse error at line 1, column 2: ", which we state ourselves.
std::string parse_error_detail(const std::string& what) {
  const std::string text = without_exception_id(what);
  const size_t at = text.find(": ");
  return at == std::string::npos ? text : text.substr(at + 2);
}

}  // namespace

std::string join(std::string_view path, std::string_view key) {
  if (path.empty()) {
    return std::string(key);
  }
  return std::string(path) + "." + std::string(key);
}

std::string join(std::string_view path, size_t index) {
  return std::string(path) + "[" + std::to_string(index) + "]";
}

std::string describe(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > kMaxQuoted) {
    text.resize(kMaxQuoted);
    text += "...";
  }
  return text;
}

std::string quote(std::string_view text) { return describe(Json(std::string(text))); }

namespace {

// Builds the document as nlohmann's own DOM parser does (this forwards every event to it) and
// refuses a key given twice in one object: nlohmann keeps the last, so a file that says
// `"vocab": 1000, ... "vocab": 32000` would be read as whichever came last, with no sign that
// the author meant two things. Tracks where the parse is, so that the error names the field.
// A SAX handler rather than a parse callback: with a callback nlohmann rescans every object
// at its end for discarded members, a third of the time of a large manifest.
class GuardedDomSax {
 public:
  explicit GuardedDomSax(Json& result) : dom_(result, true) {}

  bool null() { return value(dom_.null()); }
  bool boolean(bool v) { return value(dom_.boolean(v)); }
  bool number_integer(Json::number_integer_t v) { return value(dom_.number_integer(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return value(dom_.number_unsigned(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t& text) {
    return value(dom_.number_float(v, text));
  }
  bool string(Json::string_t& v) { return value(dom_.string(v)); }
  bool binary(Json::binary_t& v) { return value(dom_.binary(v)); }

  bool start_object(std::size_t size) {
    open(false);
    return dom_.start_object(size);
  }
  bool key(Json::string_t& name) {
    check_depth(frames_.size());
    Frame& frame = frames_.back();
    if (std::find(frame.keys.begin(), frame.keys.end(), name) != frame.keys.end()) {
      frame.key = name;
      throw FieldError{path(), "key given twice in one object (JSON keeps only one of them)"};
    }
    frame.keys.push_back(name);
    frame.key = name;
    return dom_.key(name);
  }
  bool end_object() { return close(dom_.end_object()); }
  bool start_array(std::size_t size) {
    open(true);
    return dom_.start_array(size);
  }
  bool end_array() { return close(dom_.end_array()); }

  template <class Exception>
  bool parse_error(std::size_t position, const std::string& last_token, const Exception& error) {
    return dom_.parse_error(position, last_token, error);
  }

 private:
  struct Frame {
    bool array;
    size_t index;
    std::string key;
    // A manifest's objects have a few keys each: a linear search beats a tree.
    std::vector<std::string> keys;
  };

  static void check_depth(size_t depth) {
    if (depth > kMaxJsonDepth) {
      throw FieldError{"", "JSON nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels"};
    }
  }
  void open(bool array) {
    check_depth(frames_.size());
    frames_.push_back({array, 0, {}, {}});
  }
  bool close(bool ok) {
    frames_.pop_back();
    element_done();
    return ok;
  }
  bool value(bool ok) {
    check_depth(frames_.size());
    element_done();
    return ok;
  }
  void element_done() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }

  std::string path() const {
    std::string out;
    for (const Frame& frame : frames_) {
      out = frame.array ? join(out, frame.index) : join(out, frame.key);
    }
    return out;
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  std::vector<Frame> frames_;
};

}  // namespace

Json parse_json_text(std::string_view text) {
  Json result;
  GuardedDomSax sax(result);
  try {
    Json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const Json::parse_error& error) {
    throw FieldError{"", "malformed JSON at " + position_of(text, error.byte) + ": " +
                             parse_error_detail(error.what())};
  } catch (const Json::out_of_range& error) {
    // nlohmann reports numbers beyond double's range (1e999) this way, without a position.
    throw FieldError{"", "malformed JSON: " + without_exception_id(error.what())};
  }
  return result;
}

uint64_t as_u64(const Json& value, const std::string& field) {
  if (value.is_number_integer() && !value.is_number_unsigned()) {
    throw FieldError{field, "negative value " + describe(value) +
                                " where an unsigned integer is "
                                "expected"};
  }
  if (!value.is_number_unsigned()) {
    wrong_type(value, field, "an unsigned integer");
  }
  return value.get<uint64_t>();
}

uint32_t as_u32(const Json& value, const std::string& field) {
  const uint64_t wide = as_u64(value, field);
  if (wide > std::numeric_limits<uint32_t>::max()) {
    throw FieldError{field, "value " + describe(value) + " does not fit in 32 bits"};
  }
  return static_cast<uint32_t>(wide);
}

int as_int(const Json& value, const std::string& field) {
  if (!value.is_number_integer()) {
    wrong_type(value, field, "an integer");
  }
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
      throw FieldError{field, "value " + describe(value) + " is out of range"};
    }
    return static_cast<int>(value.get<uint64_t>());
  }
  const int64_t wide = value.get<int64_t>();
  if (wide < std::numeric_limits<int>::min()) {
    throw FieldError{field, "value " + describe(value) + " is out of range"};
  }
  return static_cast<int>(wide);
}

int64_t as_dim(const Json& value, const std::string& field) {
  if (!value.is_number_integer()) {
    wrong_type(value, field, "an integer dimension");
  }
  if (!value.is_number_unsigned() || value.get<uint64_t>() == 0) {
    throw FieldError{field, "dimension " + describe(value) + " must be > 0"};
  }
  if (value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw FieldError{field, "dimension " + describe(value) + " overflows 64-bit arithmetic"};
  }
  return static_cast<int64_t>(value.get<uint64_t>());
}

double as_double(const Json& value, const std::string& field) {
  if (!value.is_number()) {
    wrong_type(value, field, "a number");
  }
  // Defensive: the parser refuses 1e999, and JSON could not write infinity back anyway.
  if (!std::isfinite(value.get<double>())) {
    throw FieldError{field, "number " + describe(value) + " is out of range"};
  }
  return value.get<double>();
}

bool as_bool(const Json& value, const std::string& field) {
  if (!value.is_boolean()) {
    wrong_type(value, field, "a boolean");
  }
  return value.get<bool>();
}

std::string as_string(const Json& value, const std::string& field) {
  if (!value.is_string()) {
    wrong_type(value, field, "a string");
  }
  return value.get<std::string>();
}

const Json& as_array(const Json& value, const std::string& field) {
  if (!value.is_array()) {
    wrong_type(value, field, "an array");
  }
  return value;
}

Fields::Fields(const Json& value, std::string path) : value_(value), path_(std::move(path)) {
  if (!value_.is_object()) {
    wrong_type(value_, path_.empty() ? "(document)" : path_, "an object");
  }
}

bool Fields::has(std::string_view key) const { return value_.contains(key); }

const Json& Fields::require(std::string_view key) const {
  const auto found = value_.find(key);
  if (found == value_.end()) {
    throw FieldError{at(key), "missing required field"};
  }
  return *found;
}

uint64_t Fields::u64(std::string_view key) const { return as_u64(require(key), at(key)); }
uint64_t Fields::u64(std::string_view key, uint64_t fallback) const {
  return has(key) ? u64(key) : fallback;
}
uint32_t Fields::u32(std::string_view key) const { return as_u32(require(key), at(key)); }
uint32_t Fields::u32(std::string_view key, uint32_t fallback) const {
  return has(key) ? u32(key) : fallback;
}
int Fields::i32(std::string_view key) const { return as_int(require(key), at(key)); }
int Fields::i32(std::string_view key, int fallback) const { return has(key) ? i32(key) : fallback; }
double Fields::f64(std::string_view key) const { return as_double(require(key), at(key)); }
double Fields::f64(std::string_view key, double fallback) const {
  return has(key) ? f64(key) : fallback;
}
bool Fields::boolean(std::string_view key, bool fallback) const {
  return has(key) ? as_bool(require(key), at(key)) : fallback;
}
std::string Fields::str(std::string_view key) const { return as_string(require(key), at(key)); }
std::string Fields::str(std::string_view key, std::string fallback) const {
  return has(key) ? str(key) : fallback;
}
Fields Fields::object(std::string_view key) const { return Fields(require(key), at(key)); }
const Json& Fields::array(std::string_view key) const { return as_array(require(key), at(key)); }

const Json& Fields::array_or_empty(std::string_view key) const {
  static const Json kEmpty = Json::array();
  return has(key) ? array(key) : kEmpty;
}

}  // namespace calbin::detail
