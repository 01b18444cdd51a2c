// The simulator's function table, shared by the in-process entry (calrt_sim_get_api) and
// the shared library's exported CalrtGetApi.
#include "simdev/runtime/entry_points.hpp"
#include "simdev/runtime/sim_api.h"

namespace {

using namespace simdev::runtime;

constexpr CalrtProbeExtension kProbe = {{sizeof(CalrtProbeExtension), CALRT_EXT_PROBE, nullptr},
                                        &probe_read};

CALRT_DEFINE_RUNTIME_TABLE_THEN(kApi, &kProbe.base);

}  // namespace

extern "C" const CalrtApi* calrt_sim_get_api(uint32_t abi_major) {
  return abi_major == CALRT_ABI_MAJOR ? &kApi : nullptr;
}
