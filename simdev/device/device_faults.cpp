// Placeholder: applying injected faults to the device (FAULTS.md).
#include "simdev/device/device.hpp"

namespace simdev {

Status Device::set_fault_plan(std::string_view yaml) {
  auto plan = parse_fault_plan(yaml, static_cast<uint32_t>(config_.chips));
  if (!plan) {
    return tl::unexpected(plan.error());
  }
  set_fault_plan(std::move(*plan));
  return {};
}

void Device::set_fault_plan(FaultPlanSpec plan) { faults_ = FaultInjector(std::move(plan)); }

std::vector<FaultHitCount> Device::fault_hits() const { return {}; }

}  // namespace simdev
