// Mapped memory of the client (PROTOCOL.md, "Client options"): Buffer_Map fetches a tensor's
// bytes into a shadow that the caller works on, Buffer_Unmap of an input sends them back.
// A shadow keeps its address until Buffer_Destroy, like a host-mapped buffer object, so a
// host that keeps writing through it after unmap writes here: fingerprints of the shadows
// taken at Job_Submit and compared when the job is seen final tell that it happened.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace simdev::service::client {

struct Shadow {
  std::unique_ptr<uint8_t[]> bytes;
  size_t size = 0;
  bool mapped = false;
};

class BufferShadows {
 public:
  // The stable pointer for a tensor, filled with the bytes the daemon sent; a tensor's
  // shadow keeps its address for the buffer's life (its size never changes).
  uint8_t* map(uint32_t tensor, std::span<const uint8_t> fetched);
  // Maps an input tensor again without fetching it: the daemon holds what this shadow sent
  // back last. Empty when the tensor was never fetched or is mapped.
  std::optional<std::span<uint8_t>> map_again(uint32_t tensor);
  bool is_mapped(uint32_t tensor) const;
  // Overwrites an unmapped shadow of the same size with bytes the daemon sent; false (and
  // nothing written) otherwise.
  bool refill(uint32_t tensor, std::span<const uint8_t> bytes);
  // The tensors that have a shadow.
  std::vector<uint32_t> tensors() const;
  // Marks the tensor unmapped; the bytes to send back (empty when it was not mapped here).
  std::optional<std::vector<uint8_t>> unmapped_bytes(uint32_t tensor) const;
  void set_unmapped(uint32_t tensor);

  // One fingerprint per shadow, in tensor order.
  std::vector<std::pair<uint32_t, uint64_t>> fingerprints() const;

 private:
  std::map<uint32_t, Shadow> shadows_;
};

// What the shadows of a job's buffers looked like at submission.
struct SubmitSnapshot {
  std::vector<std::pair<uint32_t, uint64_t>> input, output;
};

// The first shadow of `now` whose fingerprint differs from `then`, or nullopt.
std::optional<uint32_t> changed_tensor(const std::vector<std::pair<uint32_t, uint64_t>>& then,
                                       const std::vector<std::pair<uint32_t, uint64_t>>& now);

}  // namespace simdev::service::client
