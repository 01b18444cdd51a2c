// One model as a host drives it: its descriptor and the tensor and CSR indices that carry the
// tokens, positions, logits and sequence lengths, found by role and by name, never by position.
// The adapter binds its models with it (contract.hpp), and the smoke's ModelIo adds its
// buffers to it (runner/core/session.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "abi/calrt.hpp"

namespace calrt::llm {

// One model as the adapter drives it: its descriptor and the indices the manifest bound.
struct ModelBinding {
  calrt::ModelDesc desc;
  uint32_t token_input = 0;
  uint32_t position_input = 0;
  uint32_t logits_output = 0;  // the full logits row; unused when top_k > 0
  uint32_t top_k = 0;          // > 0: the decode ranks on the device (calrt.h, ROLE_TOP_IDS)
  uint32_t top_ids_output = 0;
  uint32_t top_logits_output = 0;
  uint32_t cur_seq_len_csr = 0;
  uint32_t past_kv_csr = 0;

  const std::string& name() const { return desc.name; }
  const calrt::TensorDesc& token() const { return desc.inputs[token_input]; }
  const calrt::TensorDesc& position() const { return desc.inputs[position_input]; }
  const calrt::TensorDesc& logits() const { return desc.outputs[logits_output]; }
  const calrt::TensorDesc& top_ids() const { return desc.outputs[top_ids_output]; }
  const calrt::TensorDesc& top_logits() const { return desc.outputs[top_logits_output]; }
  bool ranked() const { return top_k > 0; }
};

}  // namespace calrt::llm
