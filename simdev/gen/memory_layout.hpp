// Each chip's device memory plan. Both chips get the same layout, so every address in the
// manifest means the same thing on either chip. Reservations ascend without overlap:
// params, kv_cache, workspace, io, command (CSRs first), guard.
#pragma once

#include <cstdint>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen {

inline constexpr uint64_t kReservationAlignment = 64 * 1024;
inline constexpr uint64_t kIoAlignment = 64;
inline constexpr uint64_t kCommandBytes = 256 * 1024;
inline constexpr uint64_t kGuardBytes = 1024 * 1024;

struct MemoryPlan {
  std::vector<calbin::Reservation> reservations;  // chip-major
  calbin::MemoryAmount device_memory_required;    // per chip, whole MiB
};

// layers * (kv_heads / chips) * 2 (K, V) * head_dim * context * batch * 2 bytes (bf16).
uint64_t kv_cache_bytes_per_chip(const ModelConfig& config);

// Assigns every I/O tensor, ping/pong slot and CSR address of `models` and returns the
// reservations. `param_bytes` is the largest number of param bytes any chip loads.
calbin::Result<MemoryPlan> plan_memory(const ModelConfig& config, uint64_t param_bytes,
                                       std::vector<calbin::Model>& models);

}  // namespace simdev::gen
