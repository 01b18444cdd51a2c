#include "runner/scenario/scenario_calls.hpp"

#include <algorithm>

namespace runner {

std::chrono::nanoseconds CallMeter::now() {
  try {
    last_ = clock_ ? clock_.now() : device_->status().device_time;
  } catch (const calrt::Error&) {
    try {
      last_ = device_->status().device_time;
    } catch (const calrt::Error&) {
      // Neither source answers: keep the last reading, the call then counts as instant.
    }
  }
  return last_;
}

std::chrono::nanoseconds CallMeter::longest(const std::string& name) const {
  const auto found = longest_by_name_.find(name);
  return found == longest_by_name_.end() ? std::chrono::nanoseconds(0) : found->second;
}

void CallMeter::record(const char* name, std::chrono::nanoseconds took) {
  took = std::max(took, std::chrono::nanoseconds(0));
  ++calls_;
  longest_ = std::max(longest_, took);
  auto& longest = longest_by_name_[name];
  longest = std::max(longest, took);
}

}  // namespace runner
