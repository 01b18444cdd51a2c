// libcalrt_sim.so: the simulator as a runtime shared library. Built with hidden visibility,
// so CalrtGetApi (marked CALRT_EXPORT in calrt.h) is its only exported symbol.
#include "abi/calrt.h"
#include "simdev/runtime/sim_api.h"

extern "C" CALRT_EXPORT const CalrtApi* CalrtGetApi(uint32_t abi_major) {
  return calrt_sim_get_api(abi_major);
}
