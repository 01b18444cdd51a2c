// The seam for fault injection (a later issue fills it with seeded, declarative plans).
// The device asks its plan at each decision point; the default plan never injects.
#pragma once

#include <cstdint>
#include <optional>

#include "simdev/device/sim_time.hpp"
#include "simdev/device/status.hpp"

namespace simdev {

class FaultPlan {
 public:
  virtual ~FaultPlan() = default;
  // Asked when a job starts executing. A fault fails the job; a device-class code also
  // puts the device into FAULTED until a reset.
  virtual std::optional<Fault> on_job_start(uint64_t /*job_serial*/, TimePs /*now_ps*/) {
    return std::nullopt;
  }
  // Asked when a calbin's param upload begins.
  virtual std::optional<Fault> on_configure(uint64_t /*calbin_serial*/, TimePs /*now_ps*/) {
    return std::nullopt;
  }
};

}  // namespace simdev
