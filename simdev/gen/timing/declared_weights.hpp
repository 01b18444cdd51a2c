// The weights of a timing-only calbin: every shard declared in the manifest with its shape,
// dtype, quantisation and byte size, but stored nowhere (file and scale_file empty), so the
// simulator can size and time the model without its data.
#pragma once

#include <cstdint>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {

// One entry per stored shard, sharded as param_blocks.hpp shards real weights (shard c of n
// on chip c; replicated tensors on every chip). Scales are declared by count: one f32 per
// row for w8a8_dynamic (all rows when the split is along the input axis, as MODEL.md says),
// one f32 per group of kW4af16GroupSize inputs for w4af16. Fails when a w4af16 shard's rows
// do not split into whole groups.
calbin::Result<std::vector<calbin::WeightTensor>> declare_weights(
    const std::vector<WeightSpec>& specs, uint32_t chips);

// The bytes chip `chip` would load if the shards were packed as write_param_blocks packs
// them: each shard's data and its scales at kParamAlignment-aligned offsets.
uint64_t declared_param_bytes(const std::vector<calbin::WeightTensor>& entries, uint32_t chip);

}  // namespace simdev::gen
