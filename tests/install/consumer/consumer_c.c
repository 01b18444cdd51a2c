/* calrt.h and calrt_ext.h are C: a C host includes them as they are installed. */
#include <stdio.h>

#include "abi/calrt.h"
#include "abi/calrt_ext.h"

int main(void) {
  printf("consumer_c: ABI %d.%d.%d, CalrtApi of %zu bytes\n", CALRT_ABI_MAJOR, CALRT_ABI_MINOR,
         CALRT_ABI_PATCH, (size_t)CALRT_API_STRUCT_SIZE);
  return 0;
}
