#include "simdev/service/client/objects/mapping.hpp"

#include <cstring>

#include <xxhash.h>

namespace simdev::service::client {
namespace {

// XXH3, at memory speed: every submit and every final job fingerprints the shadows, the
// reference model's 303872-byte logits row among them, so a byte-wise hash would dominate the
// client's CPU per decode step (benchmarks/README.md, "calrt_service_bench").
uint64_t fingerprint(const uint8_t* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace

uint8_t* BufferShadows::map(uint32_t tensor, std::span<const uint8_t> fetched) {
  Shadow& shadow = shadows_[tensor];
  if (!shadow.bytes || shadow.size != fetched.size()) {
    // make_unique<T[]> value-initialises, so even an empty tensor has a non-NULL address.
    shadow.bytes = std::make_unique<uint8_t[]>(fetched.empty() ? 1 : fetched.size());
    shadow.size = fetched.size();
  }
  if (!fetched.empty()) {
    std::memcpy(shadow.bytes.get(), fetched.data(), fetched.size());
  }
  shadow.mapped = true;
  return shadow.bytes.get();
}

std::optional<std::span<uint8_t>> BufferShadows::map_again(uint32_t tensor) {
  auto it = shadows_.find(tensor);
  if (it == shadows_.end() || it->second.mapped) {
    return std::nullopt;
  }
  it->second.mapped = true;
  return std::span<uint8_t>(it->second.bytes.get(), it->second.size);
}

bool BufferShadows::is_mapped(uint32_t tensor) const {
  auto it = shadows_.find(tensor);
  return it != shadows_.end() && it->second.mapped;
}

bool BufferShadows::refill(uint32_t tensor, std::span<const uint8_t> bytes) {
  auto it = shadows_.find(tensor);
  if (it == shadows_.end() || it->second.mapped || it->second.size != bytes.size()) {
    return false;
  }
  if (!bytes.empty()) std::memcpy(it->second.bytes.get(), bytes.data(), bytes.size());
  return true;
}

std::vector<uint32_t> BufferShadows::tensors() const {
  std::vector<uint32_t> out;
  out.reserve(shadows_.size());
  for (const auto& [tensor, shadow] : shadows_) out.push_back(tensor);
  return out;
}

std::optional<std::vector<uint8_t>> BufferShadows::unmapped_bytes(uint32_t tensor) const {
  auto it = shadows_.find(tensor);
  if (it == shadows_.end() || !it->second.mapped) {
    return std::nullopt;
  }
  const Shadow& s = it->second;
  return std::vector<uint8_t>(s.bytes.get(), s.bytes.get() + s.size);
}

void BufferShadows::set_unmapped(uint32_t tensor) {
  if (auto it = shadows_.find(tensor); it != shadows_.end()) {
    it->second.mapped = false;
  }
}

std::vector<std::pair<uint32_t, uint64_t>> BufferShadows::fingerprints() const {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  out.reserve(shadows_.size());
  for (const auto& [tensor, shadow] : shadows_) {
    out.emplace_back(tensor, fingerprint(shadow.bytes.get(), shadow.size));
  }
  return out;
}

std::optional<uint32_t> changed_tensor(const std::vector<std::pair<uint32_t, uint64_t>>& then,
                                       const std::vector<std::pair<uint32_t, uint64_t>>& now) {
  for (const auto& [tensor, hash] : then) {
    for (const auto& [t, h] : now) {
      if (t == tensor && h != hash) {
        return tensor;
      }
    }
  }
  return std::nullopt;
}

}  // namespace simdev::service::client
