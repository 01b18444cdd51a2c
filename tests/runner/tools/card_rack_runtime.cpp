// A test-only runtime with three PCIe cards, the second one dead: Device_Create of kind
// PCIe opens the simulator at index 0 and 2, fails with DEVICE_LOST at 1 and answers
// NOT_FOUND from 3 on, as a host with a failed card would. What `calrt devices` must list.
#include "abi/calrt.h"
#include "simdev/runtime/errors.hpp"
#include "tests/runner/conformance/mutant_runtime.hpp"

namespace {

const CalrtApi* g_forwarding = nullptr;

CalrtError* rack_device_create(Calrt_Device_Create_Args* args) {
  if (args == nullptr || args->kind != CALRT_DEVICE_PCIE) {
    return g_forwarding->Device_Create(args);
  }
  if (args->index == 1) {
    return simdev::runtime::make_error(CALRT_DEVICE_LOST, "card 1 does not answer on the link");
  }
  if (args->index >= 3) {
    return simdev::runtime::make_error(CALRT_NOT_FOUND,
                                       "no PCIe card at index " + std::to_string(args->index));
  }
  Calrt_Device_Create_Args sim = *args;
  sim.kind = CALRT_DEVICE_SIM;
  const CalrtError* error = g_forwarding->Device_Create(&sim);
  args->device = sim.device;
  return const_cast<CalrtError*>(error);
}

}  // namespace

extern "C" CALRT_EXPORT const CalrtApi* CalrtGetApi(uint32_t abi_major) {
  g_forwarding = calrt::mutant::mutant_api("none", abi_major);
  if (g_forwarding == nullptr) {
    return nullptr;
  }
  static const CalrtApi table = [] {
    CalrtApi t = *g_forwarding;
    t.Device_Create = &rack_device_create;
    return t;
  }();
  return &table;
}
