// A test-only runtime library whose Job_Wait calls exit(0), and whose Calbin_Create calls
// exit(1) on a calbin it refuses: the simulator otherwise. Before each clause ran in a process
// of its own, such a runtime made `calrt conformance` exit 0 with no summary and no report,
// which a CI job records as a pass; and a clause's process that ends this way never removes
// the files it made.
#include <cstdlib>

#include "abi/calrt.h"
#include "tests/runner/conformance/mutant_runtime.hpp"

namespace {

const CalrtApi* forwarding_api = nullptr;

CalrtError* exiting_job_wait(Calrt_Job_Wait_Args* /*args*/) { std::exit(0); }

CalrtError* exiting_calbin_create(Calrt_Calbin_Create_Args* args) {
  CalrtError* error = forwarding_api->Calbin_Create(args);
  if (error != nullptr) {
    std::exit(1);
  }
  return nullptr;
}

}  // namespace

extern "C" CALRT_EXPORT const CalrtApi* CalrtGetApi(uint32_t abi_major) {
  const CalrtApi* forwarding = calrt::mutant::mutant_api("none", abi_major);
  if (forwarding == nullptr) {
    return nullptr;
  }
  forwarding_api = forwarding;
  static const CalrtApi table = [forwarding] {
    CalrtApi t = *forwarding;
    t.Job_Wait = &exiting_job_wait;
    t.Calbin_Create = &exiting_calbin_create;
    return t;
  }();
  return &table;
}
