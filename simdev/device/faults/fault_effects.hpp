// The narrow interface through which an injected fault acts on the device: the effects in
// faults/ decide what a fault does, and reach the Device only through these calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "abi/calrt.h"
#include "simdev/device/base/sim_time.hpp"

namespace simdev {

struct Job;

class FaultEffects {
 public:
  // A device-class fault: FAULTED, needing reset `level` (a persistent one stays after it).
  virtual void raise_device_fault(CalrtCode code, uint32_t level, bool persistent,
                                  const std::string& cause) = 0;
  // A part broken before it shows (a hang, a link down): the next reset must reach `level`.
  virtual void note_latent_fault(uint32_t level, bool persistent, const std::string& cause) = 0;
  // Surprise removal: every chip FAILED and every in-flight job failed with DEVICE_LOST.
  virtual void lose_device(const std::string& cause) = 0;
  virtual void fail_in_flight(CalrtCode code, const std::string& why) = 0;
  // Ends one job (READY/FAILED with `code`).
  virtual void fail_job_now(Job& job, CalrtCode code, std::string message) = 0;
  // A chip stops where `activity` says; HUNG and FAILED stay until a reset.
  virtual void stop_chip(uint32_t chip, CalrtChipHealth health, std::string activity) = 0;
  virtual void correct_ecc(uint32_t chip) = 0;
  virtual void count_uncorrected(uint32_t chip) = 0;
  // Thermal throttling: the chip computes `factor` times slower until `until`.
  virtual void throttle_chip(uint32_t chip, TimePs until, uint32_t factor) = 0;
  // Flips one bit of the job's KV on `chip` ("layer 1 key slot 3 bit 5"); nullopt when the
  // job holds no KV.
  virtual std::optional<std::string> flip_kv_bit(const Job& job, uint32_t chip, uint64_t draw) = 0;
  virtual uint32_t chip_count() const = 0;

 protected:
  ~FaultEffects() = default;
};

}  // namespace simdev
