#include "runner/core/submission_inputs.hpp"

#include "runner/core/session.hpp"
#include "runner/core/tensor_io.hpp"

namespace runner {

std::vector<int32_t> positions_from(int32_t first_position, size_t count) {
  std::vector<int32_t> positions(count);
  for (size_t t = 0; t < count; ++t) {
    positions[t] = first_position + static_cast<int32_t>(t);
  }
  return positions;
}

CsrValues write_submission(ModelIo& io, std::span<const int32_t> tokens, int32_t first_position,
                           uint64_t past, calrt::Timeout timeout) {
  const std::vector<int32_t> positions = positions_from(first_position, tokens.size());
  {
    const calrt::Mapping map = io.input.map(io.token_input, timeout);
    write_row_i32(map.bytes(), io.token(), tokens);
  }
  {
    const calrt::Mapping map = io.input.map(io.position_input, timeout);
    write_row_i32(map.bytes(), io.position(), positions);
  }
  io.input.set_csr(io.cur_seq_len_csr, tokens.size());
  io.input.set_csr(io.past_kv_csr, past);
  return CsrValues{io.input.csr(io.cur_seq_len_csr), io.input.csr(io.past_kv_csr)};
}

}  // namespace runner
