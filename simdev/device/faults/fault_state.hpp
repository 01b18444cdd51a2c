// The device's fault and health state (FAULTS.md): the fault plan and how often each kind hit
// each site, the most recent injections, each chip's condition, and what clears the current
// fault (the lowest reset level, whether a persistent fault fired, the root cause). The
// Device owns one and acts on it for FaultEffects; the state machine's own flags (FAULTED,
// LOST) and the device's error counters stay with the Device.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "abi/calrt.h"
#include "simdev/device/base/sim_time.hpp"
#include "simdev/device/faults/fault_plan.hpp"

namespace simdev {

class FaultState {
 public:
  // What the injected faults did to one chip.
  struct ChipCondition {
    // The fault condition: HUNG (a hang, a crash, the watchdog), DEGRADED (uncorrectable
    // ECC, D2D link down), FAILED (lost); OK otherwise. health() adds what depends on time
    // and counters (throttling, corrected ECC): use it for the chip's health.
    CalrtChipHealth health = CALRT_CHIP_OK;
    // What it does or where it stopped (hang report). The Device refines "computing job #N"
    // into the segment at the current time.
    std::string activity = "idle";
    bool stopped = false;           // activity tells where it stopped; kept until a reset
    TimePs throttled_until_ps = 0;  // thermal throttling: slower until then
    uint32_t throttle_factor = 1;
    uint64_t ecc_corrected = 0;              // since the device was created
    uint64_t ecc_corrected_since_reset = 0;  // DEGRADED while non-zero
    uint64_t ecc_uncorrected = 0;            // since the device was created
  };
  // One injection, for the hang report and the state hash.
  struct InjectionRecord {
    FaultKind kind{};
    FaultSite site{};
    uint64_t job_serial = 0;  // 0 when not a job's operation
    TimePs at_ps = 0;
    std::string detail;
  };
  using HitCounts = std::array<std::array<uint64_t, kFaultSiteCount>, kFaultKindCount>;
  static constexpr size_t kMaxInjectionRecords = 64;

  explicit FaultState(size_t chips) : chips_(chips) {}

  // The plan. Replacing it keeps the hit counters.
  void set_plan(FaultPlanSpec plan) { injector_ = FaultInjector(std::move(plan)); }
  const FaultPlanSpec& plan() const { return injector_.plan(); }
  // One entry per (kind, site) pair at which a kind can be injected, in a fixed order.
  std::vector<FaultHitCount> hits() const;
  const HitCounts& hit_counts() const { return hit_counts_; }
  // Asks the plan at one device operation and counts the hits; the caller applies each
  // injection and records it.
  std::vector<Injection> inject(const FaultOperation& operation);
  // Keeps the most recent kMaxInjectionRecords.
  void record(const Injection& injection, FaultSite site, uint64_t job_serial, TimePs at,
              std::string detail);
  const std::vector<InjectionRecord>& injections() const { return injections_; }

  // A fault that the next reset must reach `level` to clear (a persistent one: no reset
  // clears it). The first cause is the root cause; later ones follow from it.
  void note(uint32_t level, bool persistent, const std::string& cause);
  // The device was lost during `cause`: that is the cause from now on.
  void lose(const std::string& cause) { cause_ = "device lost during " + cause; }
  // The lowest reset level that clears the current fault; 0 when healthy.
  uint32_t needs_reset() const { return needs_reset_; }
  bool stuck() const { return stuck_; }  // a persistent fault fired: no self-test passes
  const std::string& cause() const { return cause_; }
  // A reset's self-test at `level`. Corrected ECC errors mark a chip DEGRADED until the next
  // reset, passed or not. Passes (the fault cleared, every chip healthy and idle again) when
  // the level reaches what the fault needs and nothing persistent fired.
  bool self_test(uint32_t level);

  // Chips.
  const std::vector<ChipCondition>& chips() const { return chips_; }
  uint32_t chip_count() const { return static_cast<uint32_t>(chips_.size()); }
  // The chip's health at `now`: its fault condition, else DEGRADED while throttled or with
  // corrected ECC errors since the last reset.
  CalrtChipHealth health(uint32_t chip, TimePs now) const;
  // A FAILED (lost) or HUNG chip stays so until a reset, whatever happens after.
  void stop_chip(uint32_t chip, CalrtChipHealth health, std::string activity);
  void throttle_chip(uint32_t chip, TimePs until, uint32_t factor);
  void correct_ecc(uint32_t chip);
  void count_uncorrected(uint32_t chip);
  // What every chip that has not stopped does now ("idle", "computing job #3").
  void set_activity(const std::string& activity);

 private:
  FaultInjector injector_;
  HitCounts hit_counts_{};
  std::vector<ChipCondition> chips_;
  std::vector<InjectionRecord> injections_;  // bounded: the most recent kMaxInjectionRecords
  uint32_t needs_reset_ = 0;
  bool stuck_ = false;
  std::string cause_;
};

}  // namespace simdev
