// What each fault kind does when it fires at a job's compute (FAULTS.md): one function per
// kind behind apply_compute_fault, the single dispatch. Effects that end the job or the
// device act at once through FaultEffects; hangs, link failures and slowness are gathered in
// ComputeFaults and placed on the job's timeline by the Device once every injection of the
// point is known.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "simdev/device/faults/fault_effects.hpp"
#include "simdev/device/faults/fault_plan.hpp"
#include "simdev/device/job.hpp"

namespace simdev {

struct ComputeFaults {
  uint64_t slow = 1;  // the compute takes this many times longer
  struct Stall {
    bool one_chip = false;  // chip_hang: one chip stops, the others wait at the barrier
    uint32_t chip = 0;
    size_t segment = 0;
    bool persistent = false;
  };
  std::optional<Stall> hang;  // the first hang wins
  struct LinkDown {
    size_t segment = 0;
    bool persistent = false;
  };
  std::optional<LinkDown> link_down;
};

// Applies `injection` at the compute of `job` (`where` names it in messages) and returns the
// detail its injection record carries.
std::string apply_compute_fault(const Injection& injection, Job& job, TimePs now,
                                const std::string& where, FaultEffects& device,
                                ComputeFaults& gathered);

// "segment 7 (attention, layer 1)"; clamped to the last segment.
std::string describe_segment(const std::vector<Segment>& segments, size_t index);

}  // namespace simdev
