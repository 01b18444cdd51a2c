// The prefill and decode models of a preset (dense or MoE): I/O tensors, CSRs, ping/pong slot
// names, workspace and op lists. Addresses are left at zero for memory_layout.hpp to assign.
#pragma once

#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/gen/model_config.hpp"

namespace simdev::gen {

inline constexpr const char* kCsrCurSeqLen = "cur_seq_len";
inline constexpr const char* kCsrPastKvSeqLen = "past_kv_cur_seq_len";

calbin::Result<std::vector<calbin::Model>> describe_models(const ModelConfig& config);

}  // namespace simdev::gen
