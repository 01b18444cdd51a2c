/* A deliberately broken CalRT runtime library, built once per FAKE_MODE_* to test the
 * loader's errors: a library without CalrtGetApi, one serving no table for our major, one
 * whose table claims another major, and one whose table's struct_size is implausible. */
#include <stddef.h>

#include "abi/calrt.h"

#if defined(FAKE_MODE_nosym)
CALRT_EXPORT int calrt_fake_not_the_entry_point(void) { return 42; }
#else

static void fake_error_destroy(Calrt_Error_Destroy_Args* args) { (void)args; }
static void fake_error_message(Calrt_Error_Message_Args* args) { (void)args; }
static void fake_error_get_code(Calrt_Error_GetCode_Args* args) { (void)args; }

static CalrtApi fake_table = {
    .struct_size = CALRT_API_STRUCT_SIZE,
    .abi_major = CALRT_ABI_MAJOR,
    .abi_minor = CALRT_ABI_MINOR,
    .abi_patch = CALRT_ABI_PATCH,
    .Error_Destroy = fake_error_destroy,
    .Error_Message = fake_error_message,
    .Error_GetCode = fake_error_get_code,
};

CALRT_EXPORT const CalrtApi* CalrtGetApi(uint32_t abi_major) {
  (void)abi_major;
#if defined(FAKE_MODE_null)
  (void)fake_table;
  return NULL;
#elif defined(FAKE_MODE_wrong_major)
  fake_table.abi_major = CALRT_ABI_MAJOR + 99;
  return &fake_table;
#elif defined(FAKE_MODE_bad_size)
  fake_table.struct_size = 8;
  return &fake_table;
#else
  return &fake_table; /* FAKE_MODE_minimal: valid, with nothing but the error entries */
#endif
}
#endif
