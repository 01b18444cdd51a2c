#include "runner/bench/bench_host_time.hpp"

#include <cmath>

namespace runner {

HostTime::HostTime(HostTimeMode mode, HostTimeModel model, const calrt::Device& device)
    : mode_(mode), model_(model), device_(device), clock_(calrt::DeviceClock::of(device)) {}

const char* HostTime::clock_label() const {
  return mode_ == HostTimeMode::model ? "host-model" : "host-wall";
}

const char* HostTime::device_clock_mode() const {
  if (!clock_) {
    return "none";
  }
  return clock_.mode() == calrt::ClockMode::paced ? "paced" : "virtual";
}

uint64_t HostTime::modelled_ns(uint64_t bytes) const {
  // gbps is validated > 0; GB/s is bytes per ns.
  const double transfer = std::ceil(static_cast<double>(bytes) / model_.gbps);
  return model_.overhead_ns + static_cast<uint64_t>(transfer);
}

int64_t HostTime::device_now() const {
  return clock_ ? clock_.now().count() : device_.status().device_time.count();
}

HostSpan HostTime::charge(int64_t charged_ns) {
  if (clock_) {
    clock_.host_spend(std::chrono::nanoseconds(charged_ns));
  }
  // Read after charging: on a virtual clock end = before + charged; on a paced clock or real
  // hardware the time has passed already. Either way the span ends now.
  HostSpan span;
  span.end_ns = device_now();
  span.charged_ns = charged_ns;
  span.begin_ns = span.end_ns - charged_ns;
  return span;
}

}  // namespace runner
