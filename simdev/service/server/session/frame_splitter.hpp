// frame_splitter.hpp: cuts a byte stream into protocol frames (PROTOCOL.md, Framing). The
// header is checked as soon as its 12 bytes are in, so a bad length is refused before any
// payload is buffered; the buffer never holds more than one header plus one bounded payload
// beyond what the reader has already taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "simdev/service/protocol.hpp"

namespace simdev::service::server {

struct Frame {
  FrameHeader header;
  std::vector<uint8_t> payload;
};

class FrameSplitter {
 public:
  void append(std::span<const uint8_t> bytes);
  // The next complete frame; nullopt while more bytes are needed. A header error is sticky:
  // the stream cannot be resynchronised after it.
  tl::expected<std::optional<Frame>, std::string> next();
  // Bytes received but not yet returned as a frame (a truncated frame at close).
  size_t pending_bytes() const { return buffer_.size() - consumed_; }
  // The largest payload accepted from now on, below the protocol's own limit: a peer that has
  // not said hello gets a few KiB, not the 64 MiB a session may send.
  void set_payload_limit(size_t bytes) { payload_limit_ = bytes; }

 private:
  size_t payload_limit_ = SIZE_MAX;
  std::vector<uint8_t> buffer_;
  size_t consumed_ = 0;
  std::optional<FrameHeader> header_;
  std::string error_;
};

}  // namespace simdev::service::server
