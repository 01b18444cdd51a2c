// `calrt plan [CALBIN]`: the capacity calculator. From a calbin (its LLM info, weights and
// reservations) or from flags alone: KV bytes in total and per chip, the per-chip inequality
// with its headroom, the largest context and batch that fit, and the KV recomputed with an
// S8 V-cache on the actual K/V dtypes. Flags given with a calbin override its figures.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace runner {

struct PlanOptions {
  std::filesystem::path calbin;  // empty: everything from flags
  std::optional<uint64_t> layers, kv_heads, head_dim, context, batch;
  std::optional<uint32_t> chips;
  std::optional<std::string> k_dtype, v_dtype;
  double params_gib_per_chip = 0.0;  // flags-only mode
  double workspace_mib = 0.0;        // flags-only mode
  double io_mib = 0.0;               // flags-only mode: I/O and command buffers
  double guard_mib = 0.0;            // flags-only mode
  double usable_gib_per_chip = 16.0;
  std::filesystem::path json;
};

int run_plan(const PlanOptions& options);

}  // namespace runner
