// Parsing and formatting the .npy header dict (see npy_header.hpp and the NumPy format spec,
// numpy/lib/format.py).
#include "calbin/npy_header.hpp"

#include <limits>
#include <optional>

#include "calbin/field_error.hpp"

namespace calbin::detail {
namespace {

// A recursive-descent reader over the handful of Python literals a header may hold: strings,
// True/False, non-negative integers and tuples of them. Anything else is an error.
class DictReader {
 public:
  explicit DictReader(std::string_view text) : text_(text) {}

  NpyHeader read();

 private:
  [[noreturn]] void error(const std::string& field, const std::string& message) const {
    throw FieldError{field, message + " at header offset " + std::to_string(pos_)};
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c, const std::string& field) {
    if (!consume(c)) {
      error(field, std::string("expected '") + c + "'");
    }
  }
  std::string read_string(const std::string& field);
  bool read_bool(const std::string& field);
  int64_t read_int(const std::string& field);
  std::vector<int64_t> read_tuple(const std::string& field);
  void read_entry(NpyHeader& header, unsigned& seen);

  std::string_view text_;
  size_t pos_ = 0;
};

std::string DictReader::read_string(const std::string& field) {
  skip_space();
  if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
    error(field, "expected a quoted string");
  }
  const char quote_char = text_[pos_++];
  const size_t end = text_.find(quote_char, pos_);
  if (end == std::string_view::npos) {
    error(field, "unterminated string");
  }
  std::string value(text_.substr(pos_, end - pos_));
  if (value.find('\\') != std::string::npos) {
    error(field, "escape sequences are not supported in \"" + value + "\"");
  }
  pos_ = end + 1;
  return value;
}

bool DictReader::read_bool(const std::string& field) {
  skip_space();
  for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
    const std::string_view literal(word);
    if (text_.substr(pos_, literal.size()) == literal) {
      pos_ += literal.size();
      return value;
    }
  }
  error(field, "expected True or False");
}

int64_t DictReader::read_int(const std::string& field) {
  skip_space();
  if (pos_ < text_.size() && text_[pos_] == '-') {
    error(field, "negative dimension");
  }
  uint64_t value = 0;
  const size_t start = pos_;
  for (; pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9'; ++pos_) {
    const auto digit = static_cast<uint64_t>(text_[pos_] - '0');
    if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) {
      error(field, "dimension overflows 64-bit arithmetic");
    }
    value = value * 10 + digit;
  }
  if (pos_ == start) {
    error(field, "expected a dimension");
  }
  if (pos_ < text_.size() && text_[pos_] == 'L') {
    ++pos_;  // Python 2 long literal, as very old NumPy wrote
  }
  return static_cast<int64_t>(value);
}

// "()", "(3,)", "(2, 3)", "(2, 3,)"; "(3)" is the integer 3 in Python, not a tuple.
std::vector<int64_t> DictReader::read_tuple(const std::string& field) {
  expect('(', field);
  std::vector<int64_t> shape;
  bool trailing_comma = false;
  while (!consume(')')) {
    if (!shape.empty() && !trailing_comma) {
      error(field, "expected ',' or ')'");
    }
    if (shape.size() == kMaxNpyRank) {
      error(field, "rank exceeds the maximum of " + std::to_string(kMaxNpyRank));
    }
    shape.push_back(read_int(field));
    trailing_comma = consume(',');
  }
  if (shape.size() == 1 && !trailing_comma) {
    error(field, "(n) is not a tuple; NumPy writes (n,)");
  }
  return shape;
}

void DictReader::read_entry(NpyHeader& header, unsigned& seen) {
  const std::string key = read_string("header");
  expect(':', key);
  unsigned bit = 0;
  if (key == "descr") {
    header.descr = read_string(key);
    bit = 1;
  } else if (key == "fortran_order") {
    header.fortran_order = read_bool(key);
    bit = 2;
  } else if (key == "shape") {
    header.shape = read_tuple(key);
    bit = 4;
  } else {
    error("header", "unexpected key '" + key + "'");
  }
  if ((seen & bit) != 0) {
    error(key, "duplicate key");
  }
  seen |= bit;
}

NpyHeader DictReader::read() {
  NpyHeader header;
  unsigned seen = 0;
  expect('{', "header");
  while (!consume('}')) {
    read_entry(header, seen);
    if (!consume(',')) {
      expect('}', "header");
      break;
    }
  }
  skip_space();
  if (pos_ != text_.size()) {
    error("header", "unexpected text after the dict");
  }
  if (seen != 7) {
    error("header", "the dict needs the keys 'descr', 'fortran_order' and 'shape'");
  }
  return header;
}

// Python's repr of a tuple of ints.
std::string tuple_repr(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

NpyHeader parse_npy_header(std::string_view text) { return DictReader(text).read(); }

std::string format_npy_header(std::string_view descr, const std::vector<int64_t>& shape) {
  constexpr size_t kMagicAndLength = 10;    // "\x93NUMPY", version 1.0, uint16 length
  constexpr size_t kAlign = 64;             // numpy.lib.format.ARRAY_ALIGN
  constexpr size_t kGrowthAxisDigits = 21;  // numpy.lib.format.GROWTH_AXIS_MAX_DIGITS
  std::string dict = "{'descr': '" + std::string(descr) +
                     "', 'fortran_order': False, 'shape': " + tuple_repr(shape) + ", }";
  if (!shape.empty()) {
    const size_t digits = std::to_string(shape[0]).size();
    dict.append(digits < kGrowthAxisDigits ? kGrowthAxisDigits - digits : 0, ' ');
  }
  const size_t unpadded = kMagicAndLength + dict.size() + 1;  // + '\n'
  // NumPy pads a full extra 64 bytes when the header is already aligned; so do we, byte for byte.
  dict.append(kAlign - unpadded % kAlign, ' ');
  dict += '\n';
  const auto length = static_cast<uint16_t>(dict.size());
  std::string prefix("\x93NUMPY\x01\x00", 8);
  prefix += static_cast<char>(length & 0xFF);
  prefix += static_cast<char>(length >> 8);
  return prefix + dict;
}

}  // namespace calbin::detail
