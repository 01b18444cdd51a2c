// A calbin as the device holds it: the verified manifest and, once configured, each chip's
// weights, the memory it takes and the allocator of its KV reservation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/device/base/workers.hpp"
#include "simdev/device/model/capacity.hpp"
#include "simdev/device/model/chip_weights.hpp"
#include "simdev/device/model/chiplet.hpp"
#include "simdev/device/model/kv_allocator.hpp"
#include "simdev/device/model/model_dims.hpp"
#include "simdev/device/timing/cost_model.hpp"

namespace simdev {

struct CalbinImage {
  uint64_t serial = 0;  // "calbin #N" in messages
  std::filesystem::path dir;
  calbin::Manifest manifest;
  KvGeometry kv;
  std::vector<CostPlan> cost_plans;  // one per model, for this device's config

  // Set by a successful configure, cleared by a chip/full reset.
  bool configured = false;
  std::vector<uint64_t> memory_used_bytes;  // per chip
  std::optional<ModelDims> dims;            // functional calbins only
  std::vector<ChipWeights> weights;         // one per chip; empty for timing-only calbins
  std::unique_ptr<KvAllocator> kv_allocator;
  // The chips' working memory between steps; the device runs one step at a time.
  std::vector<ChipScratch> scratch;
  // The host threads the configured calbin's steps run on (DeviceConfig::host_threads),
  // shared with every other calbin in the process (Workers::shared).
  std::shared_ptr<Workers> workers;

  bool functional() const { return !manifest.timing_only && !weights.empty(); }

  // Index of the model with exactly this name; nullopt otherwise.
  std::optional<size_t> find_model(std::string_view name) const;
  // NOT_FOUND text: `model "x" not found in calbin #N; models: a, b`.
  std::string not_found_message(std::string_view name) const;
};

}  // namespace simdev
