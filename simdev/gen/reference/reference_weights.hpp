// The reference's view of the stored weights: dequantised (int8 * row scale, bf16 -> f32)
// and unsplit, taken from the quantised tensors before they were sharded into files.
#pragma once

#include <vector>

#include "calbin/result.hpp"
#include "simdev/gen/model_config.hpp"
#include "simdev/gen/reference/reference_model.hpp"
#include "simdev/gen/weights/weights.hpp"

namespace simdev::gen {

calbin::Result<ref::Weights> dequantised_unsplit(const ModelConfig& config,
                                                 const std::vector<StoredWeight>& weights);

}  // namespace simdev::gen
