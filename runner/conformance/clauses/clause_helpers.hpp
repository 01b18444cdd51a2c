// Helpers that clauses of more than one section use.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "runner/conformance/conformance_context.hpp"

namespace runner {

// A value the runtime reports against the one the calbin holds.
template <class A, class B>
void expect_equal(const A& actual, const B& expected, const std::string& what) {
  require(actual == expected,
          fmt::format("{}: runtime says {}, the calbin {}", what, actual, expected));
}

// Buffer_SetCsr and Buffer_GetCsr through the raw table, for their codes.
inline CallOutcome set_csr(ClauseContext& ctx, CalrtBuffer* buffer, uint32_t index,
                           uint64_t value) {
  auto args = args_of<Calrt_Buffer_SetCsr_Args>();
  args.buffer = buffer;
  args.csr_index = index;
  args.value = value;
  return CONF_CALL(ctx, Buffer_SetCsr, args);
}

inline CallOutcome get_csr(ClauseContext& ctx, CalrtBuffer* buffer, uint32_t index,
                           uint64_t* value) {
  auto args = args_of<Calrt_Buffer_GetCsr_Args>();
  args.buffer = buffer;
  args.csr_index = index;
  const CallOutcome outcome = CONF_CALL(ctx, Buffer_GetCsr, args);
  *value = args.value;
  return outcome;
}

}  // namespace runner
