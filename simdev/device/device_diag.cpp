// Placeholder: the hang report and the state hash.
#include "simdev/device/device.hpp"

namespace simdev {

std::string Device::hang_report() const { return "{}"; }
uint64_t Device::state_hash() const { return 0; }

}  // namespace simdev
