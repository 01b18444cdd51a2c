#include "simdev/service/server/session/frame_splitter.hpp"

#include <utility>

namespace simdev::service::server {

void FrameSplitter::append(std::span<const uint8_t> bytes) {
  if (!error_.empty()) return;
  // Compacting only once the consumed prefix dominates keeps appends amortised O(n).
  if (consumed_ > 0 && consumed_ >= buffer_.size() / 2) {
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(consumed_));
    consumed_ = 0;
  }
  buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
}

tl::expected<std::optional<Frame>, std::string> FrameSplitter::next() {
  if (!error_.empty()) return tl::unexpected(error_);
  const std::span<const uint8_t> left = std::span<const uint8_t>(buffer_).subspan(consumed_);
  if (!header_) {
    if (left.size() < kHeaderBytes) return std::optional<Frame>{};
    auto header = decode_header(left.first(kHeaderBytes));
    if (!header) {
      error_ = header.error();
      return tl::unexpected(error_);
    }
    if (header->payload_bytes() > payload_limit_) {
      error_ = "a payload of " + std::to_string(header->payload_bytes()) +
               " bytes exceeds the limit of " + std::to_string(payload_limit_) +
               " bytes at this stage";
      return tl::unexpected(error_);
    }
    header_ = *header;
  }
  const size_t payload_bytes = header_->payload_bytes();
  if (left.size() < kHeaderBytes + payload_bytes) return std::optional<Frame>{};
  Frame frame;
  frame.header = *header_;
  const auto payload = left.subspan(kHeaderBytes, payload_bytes);
  frame.payload.assign(payload.begin(), payload.end());
  consumed_ += kHeaderBytes + payload_bytes;
  header_.reset();
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  }
  return std::optional<Frame>(std::move(frame));
}

}  // namespace simdev::service::server
