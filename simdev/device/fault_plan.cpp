// Placeholder: the fault plan parser and injector are being written (FAULTS.md).
#include "simdev/device/fault_plan.hpp"

namespace simdev {

const char* to_string(FaultKind) { return "?"; }
const char* to_string(FaultSite) { return "?"; }
std::optional<FaultKind> parse_fault_kind(std::string_view) { return std::nullopt; }
std::optional<FaultSite> parse_fault_site(std::string_view) { return std::nullopt; }
bool can_happen(FaultKind, FaultPoint) { return false; }
bool can_happen(FaultKind, FaultSite) { return false; }
Expected<FaultPlanSpec> parse_fault_plan(std::string_view, uint32_t) {
  return fail(CALRT_UNIMPLEMENTED, "fault plans are not implemented yet");
}
std::string to_yaml(const FaultPlanSpec&) { return "{}"; }
FaultInjector::FaultInjector(FaultPlanSpec plan) : plan_(std::move(plan)) {}
std::vector<Injection> FaultInjector::at(const FaultOperation&) { return {}; }

}  // namespace simdev
