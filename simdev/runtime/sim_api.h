/* sim_api.h: the simulator's runtime, linked in-process (static library simdev_runtime).
 * The shared library libcalrt_sim.so exports the same table as CalrtGetApi. */
#ifndef SIMDEV_RUNTIME_SIM_API_H_
#define SIMDEV_RUNTIME_SIM_API_H_

#include <stdint.h>

#include "abi/calrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the simulator's function table for abi_major, or NULL for any major other than
 * CALRT_ABI_MAJOR. The table is static. */
const CalrtApi* calrt_sim_get_api(uint32_t abi_major);

#ifdef __cplusplus
}
#endif

#endif /* SIMDEV_RUNTIME_SIM_API_H_ */
