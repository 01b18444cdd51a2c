// The per-chip capacity inequality of a calbin (REFERENCE.md, "Memory"):
//   params + kv_cache + workspace + io + command + guard <= usable DRAM - other calbins.
// Each term is the calbin's reservation of that name on the chip; params falls back to the
// size of the param blocks the chip loads, workspace to the models' peak, kv_cache to the
// bytes batch x context tokens need.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/device/base/status.hpp"

namespace simdev {

struct ChipMemoryTerms {
  uint64_t params = 0;
  uint64_t kv_cache = 0;
  uint64_t workspace = 0;
  uint64_t io = 0;
  uint64_t command = 0;
  uint64_t guard = 0;
  uint64_t total() const { return params + kv_cache + workspace + io + command + guard; }
  std::string to_string() const;
};

struct KvGeometry {
  uint64_t total_tokens = 0;  // batch x context positions
  uint64_t bytes_per_token_per_chip = 0;
};

// KV geometry from the LLM info; CALBIN_INVALID when kv_heads does not split over chips.
Expected<KvGeometry> kv_geometry(const calbin::Manifest& manifest);

Expected<std::vector<ChipMemoryTerms>> memory_terms(const calbin::Manifest& manifest,
                                                    const KvGeometry& kv);

// OUT_OF_DEVICE_MEMORY naming the chip and every term when the inequality fails.
Status check_capacity(uint32_t chip, const ChipMemoryTerms& terms, uint64_t usable_bytes,
                      uint64_t used_by_others_bytes);

}  // namespace simdev
