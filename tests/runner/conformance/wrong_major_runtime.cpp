// A test-only runtime library whose entry point answers any major with a table of the next
// one: the loader refuses it. The suite must report that as a failed VER.1, with a JUnit
// file and exit 1, not as a usage error a vendor's CI cannot tell from a typo.
#include "abi/calrt.h"
#include "tests/runner/conformance/mutant_runtime.hpp"

extern "C" CALRT_EXPORT const CalrtApi* CalrtGetApi(uint32_t abi_major) {
  const CalrtApi* forwarding = calrt::mutant::mutant_api("none", abi_major);
  if (forwarding == nullptr) return nullptr;
  static const CalrtApi table = [forwarding] {
    CalrtApi t = *forwarding;
    t.abi_major = forwarding->abi_major + 1;
    return t;
  }();
  return &table;
}
