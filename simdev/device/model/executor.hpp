// Runs one functional step (a prefill chunk or a decode token) across the chiplets:
// embedding, per layer attention and MLP with the D2D all-reduce of their partial sums,
// and the gather of the per-chip vocabulary halves of the logits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "simdev/device/base/numerics_mutant.hpp"
#include "simdev/device/base/status.hpp"
#include "simdev/device/base/workers.hpp"
#include "simdev/device/model/chip_weights.hpp"
#include "simdev/device/model/chiplet.hpp"
#include "simdev/device/model/kv_store.hpp"
#include "simdev/device/model/model_dims.hpp"

namespace simdev {

struct StepRequest {
  std::span<const int32_t> tokens;               // cur_seq_len valid tokens
  std::span<const int32_t> positions;            // one per token
  size_t past = 0;                               // past_kv_cur_seq_len
  NumericsMutant mutant = NumericsMutant::none;  // test only
};

// Checks the token ids against the vocabulary (INVALID_ARGUMENT naming index and value).
Status validate_tokens(std::span<const int32_t> tokens, size_t vocab);

// Computes the step and returns the FP32 logits [vocab] of the last token. The caller has
// validated the request and backed KV slots [0, past + tokens) in kv. scratch holds one
// working area per chip (resized here) and is reused by the caller's next step. The chips
// run side by side on `workers`; the result is the same bits on any number of threads. `probes`,
// when given, receives the last token's residual stream at the CALRT_EXT_PROBE points
// (abi/calrt_ext.h): [2 * layers + 1][hidden].
std::vector<float> run_step(const ModelDims& dims, std::span<const ChipWeights> chips, KvStore& kv,
                            std::vector<ChipScratch>& scratch, Workers& workers,
                            const StepRequest& request, std::vector<float>* probes = nullptr);

}  // namespace simdev
