// libcalrt_client.so: the service client as a runtime shared library. Built with hidden
// visibility, so CalrtGetApi (marked CALRT_EXPORT in calrt.h) is its only exported symbol.
#include "abi/calrt.h"
#include "simdev/service/client/client_api.h"

extern "C" CALRT_EXPORT const CalrtApi* CalrtGetApi(uint32_t abi_major) {
  return calrt_client_entry_point(abi_major);
}
