// How long each ABI call of a scenario took in device time: the clock is read before and
// after the call (the clock extension, else Device_Status, which every state allows), so a
// call that blocked on a hung device shows up however the runtime bounded it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "abi/calrt_ext.hpp"

namespace runner {

class CallMeter {
 public:
  explicit CallMeter(const calrt::Device& device)
      : device_(&device), clock_(calrt::DeviceClock::of(device)) {}

  // The device clock now; the last reading when the device cannot tell any more.
  std::chrono::nanoseconds now();

  // Runs `call` (one ABI call, or a few that take no device time of their own) and records
  // its device time under `name`, also when it throws.
  template <class Call>
  decltype(auto) timed(const char* name, Call&& call) {
    const Scope scope(*this, name);
    return call();
  }

  std::chrono::nanoseconds longest() const { return longest_; }
  // The longest call recorded under `name` (0 if none).
  std::chrono::nanoseconds longest(const std::string& name) const;
  uint64_t calls() const { return calls_; }

 private:
  class Scope {
   public:
    Scope(CallMeter& meter, const char* name) : meter_(meter), name_(name), start_(meter.now()) {}
    ~Scope() { meter_.record(name_, meter_.now() - start_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallMeter& meter_;
    const char* name_;
    std::chrono::nanoseconds start_;
  };

  void record(const char* name, std::chrono::nanoseconds took);

  const calrt::Device* device_;
  calrt::DeviceClock clock_;
  std::chrono::nanoseconds last_{0};
  std::chrono::nanoseconds longest_{0};
  std::map<std::string, std::chrono::nanoseconds> longest_by_name_;
  uint64_t calls_ = 0;
};

}  // namespace runner
