// wire.hpp: the byte-level codec of the service protocol (PROTOCOL.md). Little-endian
// integers, length-prefixed strings and byte blocks, and bounded sequences. Decoding never
// trusts a length: every read is checked against the bytes that are left, and the first
// failure is kept (sticky) with the name of the field, so that a malformed message becomes
// one clear error instead of a crash or an unbounded allocation.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace simdev::service {

// A handle as it crosses the wire: the daemon's id for one object of one session; 0 is NULL.
struct WireHandle {
  uint64_t id = 0;
  friend bool operator==(const WireHandle&, const WireHandle&) = default;
};

// Bulk data (tensor bytes, fault plans, reports).
using Bytes = std::vector<uint8_t>;

inline constexpr uint32_t kMaxStringBytes = 1u << 20;
// Payload bound of one frame (PROTOCOL.md): tensors larger than this are not served.
inline constexpr uint32_t kMaxPayloadBytes = 64u << 20;

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}

  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { put_le(v); }
  void u32(uint32_t v) { put_le(v); }
  void u64(uint64_t v) { put_le(v); }

  void operator()(const char*, const uint8_t& v) { u8(v); }
  void operator()(const char*, const uint16_t& v) { u16(v); }
  void operator()(const char*, const uint32_t& v) { u32(v); }
  void operator()(const char*, const uint64_t& v) { u64(v); }
  void operator()(const char*, const int32_t& v) { u32(static_cast<uint32_t>(v)); }
  void operator()(const char*, const int64_t& v) { u64(static_cast<uint64_t>(v)); }
  void operator()(const char*, const WireHandle& v) { u64(v.id); }
  void operator()(const char*, const std::string& v) {
    u32(static_cast<uint32_t>(v.size()));
    out_.insert(out_.end(), v.begin(), v.end());
  }
  void operator()(const char* name, const std::optional<std::string>& v) {
    u8(v ? 1 : 0);
    if (v) (*this)(name, *v);
  }
  void operator()(const char*, const Bytes& v) {
    u32(static_cast<uint32_t>(v.size()));
    out_.insert(out_.end(), v.begin(), v.end());
  }
  template <class T, size_t N>
  void operator()(const char* name, const std::array<T, N>& v) {
    for (const T& e : v) (*this)(name, e);
  }
  // A sequence of records: a u32 count, then each record's fields.
  template <class T>
  void operator()(const char*, const std::vector<T>& v) requires(!std::is_same_v<T, uint8_t>) {
    u32(static_cast<uint32_t>(v.size()));
    for (const T& e : v) const_cast<T&>(e).visit(*this);
  }

 private:
  template <class T>
  void put_le(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}

  bool ok() const { return error_.empty(); }
  // The first failure: "field 'x': ..." ; empty while ok.
  const std::string& error() const { return error_; }
  size_t remaining() const { return in_.size() - pos_; }
  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }
  // Fails unless every byte was consumed (a message with trailing bytes is malformed).
  void expect_end(const char* what) {
    if (ok() && remaining() != 0) {
      fail(std::string(what) + ": " + std::to_string(remaining()) + " trailing bytes");
    }
  }

  uint8_t u8(const char* name) { return get_le<uint8_t>(name); }
  uint16_t u16(const char* name) { return get_le<uint16_t>(name); }
  uint32_t u32(const char* name) { return get_le<uint32_t>(name); }
  uint64_t u64(const char* name) { return get_le<uint64_t>(name); }

  void operator()(const char* name, uint8_t& v) { v = u8(name); }
  void operator()(const char* name, uint16_t& v) { v = u16(name); }
  void operator()(const char* name, uint32_t& v) { v = u32(name); }
  void operator()(const char* name, uint64_t& v) { v = u64(name); }
  void operator()(const char* name, int32_t& v) { v = static_cast<int32_t>(u32(name)); }
  void operator()(const char* name, int64_t& v) { v = static_cast<int64_t>(u64(name)); }
  void operator()(const char* name, WireHandle& v) { v.id = u64(name); }
  void operator()(const char* name, std::string& v) {
    const uint32_t size = u32(name);
    if (!ok()) return;
    if (size > kMaxStringBytes) {
      fail(std::string("field '") + name + "': string of " + std::to_string(size) +
           " bytes exceeds the limit of " + std::to_string(kMaxStringBytes));
      return;
    }
    if (!need(size, name)) return;
    v.assign(reinterpret_cast<const char*>(in_.data() + pos_), size);
    pos_ += size;
  }
  void operator()(const char* name, std::optional<std::string>& v) {
    const uint8_t present = u8(name);
    if (!ok()) return;
    if (present > 1) {
      fail(std::string("field '") + name + "': presence flag " + std::to_string(present) +
           " is neither 0 nor 1");
      return;
    }
    if (present == 0) {
      v.reset();
      return;
    }
    v.emplace();
    (*this)(name, *v);
  }
  void operator()(const char* name, Bytes& v) {
    const uint32_t size = u32(name);
    if (!ok() || !need(size, name)) return;
    v.assign(in_.begin() + static_cast<std::ptrdiff_t>(pos_),
             in_.begin() + static_cast<std::ptrdiff_t>(pos_ + size));
    pos_ += size;
  }
  template <class T, size_t N>
  void operator()(const char* name, std::array<T, N>& v) {
    for (T& e : v) (*this)(name, e);
  }
  template <class T>
  void operator()(const char* name, std::vector<T>& v) requires(!std::is_same_v<T, uint8_t>) {
    const uint32_t count = u32(name);
    if (!ok()) return;
    // Every record takes at least one byte, so a count beyond the bytes left is a lie;
    // checking it first keeps a forged count from reserving gigabytes.
    if (count > remaining()) {
      fail(std::string("field '") + name + "': count " + std::to_string(count) + " exceeds the " +
           std::to_string(remaining()) + " bytes left");
      return;
    }
    v.clear();
    v.reserve(count);
    for (uint32_t i = 0; i < count && ok(); ++i) v.emplace_back().visit(*this);
  }

 private:
  bool need(size_t n, const char* name) {
    if (n > remaining()) {
      fail(std::string("field '") + name + "': needs " + std::to_string(n) + " bytes, " +
           std::to_string(remaining()) + " left");
      return false;
    }
    return true;
  }
  template <class T>
  T get_le(const char* name) {
    if (!ok() || !need(sizeof(T), name)) return T{};
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v = static_cast<T>(v | (T{in_[pos_ + i]} << (8 * i)));
    pos_ += sizeof(T);
    return v;
  }

  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace simdev::service
