// Capacity planning: the per-chip inequality of the bring-up guide,
//
//   params + KV(batch, context, K/V dtypes) + peak workspace + I/O and command buffers
//     + allocator guard <= physical usable memory,
//
// and the KV formula  layers x kv_heads x head_dim x context x batch x (K bytes + V bytes).
// K and V carry their own dtypes so that an S8 V-cache is computed on what it really stores.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "calbin/manifest.hpp"

namespace calbin {

struct KvGeometry {
  uint64_t layers = 0;
  uint64_t kv_heads = 0;
  uint64_t head_dim = 0;
  uint64_t context = 0;
  uint64_t batch = 0;
  Dtype k_dtype = Dtype::kBf16;
  Dtype v_dtype = Dtype::kBf16;
  uint32_t chips = 1;
};

struct KvBytes {
  uint64_t total = 0;
  uint64_t per_chip = 0;            // kv heads are split over chips; a remainder head is replicated
  uint64_t per_token_per_chip = 0;  // one position of one sequence
};

// nullopt when a product overflows 64 bits or chips is 0.
std::optional<KvBytes> kv_bytes(const KvGeometry& geometry);

struct ChipBudget {
  uint32_t chip = 0;
  uint64_t params = 0;
  uint64_t kv = 0;
  uint64_t workspace = 0;
  uint64_t io_and_command = 0;
  uint64_t guard = 0;
  uint64_t usable = 0;

  // Sum of the demand terms; nullopt on overflow.
  std::optional<uint64_t> demand() const;
  // usable - demand (negative when it does not fit); nullopt on overflow.
  std::optional<int64_t> headroom() const;
};

struct CapacityPlan {
  KvGeometry geometry;
  KvBytes kv;
  std::vector<ChipBudget> chips;
  uint64_t max_context = 0;  // largest context that fits on every chip at the given batch
  uint64_t max_batch = 0;    // largest batch that fits on every chip at the given context
};

// Largest multiplier m with fixed + m * per_unit <= usable (0 if even m = 0 does not fit).
uint64_t largest_fit(uint64_t usable, uint64_t fixed, uint64_t per_unit);

// Plans a calbin: geometry from its LLM info, params per chip from its weight list,
// workspace, I/O, command and guard from its reservations and models.
Result<CapacityPlan> plan_calbin(const Manifest& manifest, uint64_t usable_bytes_per_chip);

// Plans from bare figures (the `plan` command's flags): the same arithmetic, params given.
Result<CapacityPlan> plan_figures(const KvGeometry& geometry, uint64_t params_per_chip,
                                  uint64_t workspace, uint64_t io_and_command, uint64_t guard,
                                  uint64_t usable_bytes_per_chip);

}  // namespace calbin
