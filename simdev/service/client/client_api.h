/* client_api.h: the CalRT runtime of the simulator service (simdev/service/PROTOCOL.md),
 * linked in process (static library calrt_client). Every call of its table goes over a
 * socket to `simdev serve`. The shared library libcalrt_client.so exports the same table as
 * CalrtGetApi, with the endpoint taken from CALRT_SERVICE or the Device_Create config key
 * `service.endpoint`. */
#ifndef SIMDEV_SERVICE_CLIENT_CLIENT_API_H_
#define SIMDEV_SERVICE_CLIENT_CLIENT_API_H_

#include <stdint.h>

#include "abi/calrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the client's function table for abi_major, or NULL for any major other than
 * CALRT_ABI_MAJOR. A non-NULL endpoint (`unix:PATH` or `tcp:HOST:PORT`) becomes the process
 * default for devices created without `service.endpoint`. The table is static. */
const CalrtApi* calrt_client_get_api(uint32_t abi_major, const char* endpoint);

/* The client's CalrtGetApi: the same table, the endpoint left as it is. */
const CalrtApi* calrt_client_entry_point(uint32_t abi_major);

#ifdef __cplusplus
}
#endif

#endif /* SIMDEV_SERVICE_CLIENT_CLIENT_API_H_ */
