// Per-chip op lists of a dense preset's prefill and decode graphs, with the FLOPs and DRAM
// bytes of each op for the chip's shard (MoE presets: moe_op_list.hpp). The timing model
// reads these; the functional path follows calbin/MODEL.md instead.
#pragma once

#include <cstdint>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen {

// Prefill ops cover one full chunk of prefill_chunk tokens attending causally within it;
// decode ops cover one token whose attention reads the KV of the full context.
std::vector<calbin::ChipOps> op_lists(const ModelConfig& config, calbin::ModelType type);

// Peak activation bytes one chip holds while running one submission, rounded up to 4 KiB.
uint64_t workspace_bytes(const ModelConfig& config, calbin::ModelType type);

}  // namespace simdev::gen
