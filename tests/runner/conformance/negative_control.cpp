// A negative-control runtime library (test-only, never installed): the simulator with one
// mutation, exported as CalrtGetApi so that `calrt conformance --device <library>` can be
// shown to fail exactly the clauses that mutation breaks. Built once per mutation with
// CALRT_NEGATIVE_MUTATION naming it.
#include "abi/calrt.h"
#include "tests/runner/conformance/mutant_runtime.hpp"

#ifndef CALRT_NEGATIVE_MUTATION
#error "CALRT_NEGATIVE_MUTATION must name the mutation this library applies"
#endif

extern "C" CALRT_EXPORT const CalrtApi* CalrtGetApi(uint32_t abi_major) {
  return calrt::mutant::mutant_api(CALRT_NEGATIVE_MUTATION, abi_major);
}
