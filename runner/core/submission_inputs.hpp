// One submission's inputs written into a model's input buffer: the tokens, their positions
// and the two sequence-length CSRs. Shared by the smoke's golden cases and the scenarios.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "abi/calrt.hpp"

namespace runner {

struct ModelIo;

// Positions first_position, first_position + 1, ... for `count` tokens.
std::vector<int32_t> positions_from(int32_t first_position, size_t count);

struct CsrValues {
  uint64_t cur_seq_len = 0;
  uint64_t past_kv_cur_seq_len = 0;
};

// `tokens` into the token tensor and their positions into the position tensor (layouts from
// the descriptors), then cur_seq_len = tokens.size() and past_kv_cur_seq_len = past. Returns
// the CSRs as read back, since a runtime that drops a CSR write fails silently otherwise.
// Throws calrt::Error from the runtime.
CsrValues write_submission(ModelIo& io, std::span<const int32_t> tokens, int32_t first_position,
                           uint64_t past, calrt::Timeout timeout);

}  // namespace runner
