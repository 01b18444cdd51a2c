// Host work in `calrt bench`: timing it and charging it to the device clock.
//
// On the simulator's virtual clock, device time moves only while the host waits; a host
// that converts logits or prepares inputs takes no device time unless it says so. After
// each host phase the bench calls Clock_HostSpend(duration) (calrt::DeviceClock), so the
// device runs on meanwhile: that is what lets device-clock end-to-end time include host
// work, and parallel mode overlap it with a job on the other slot.
//
// The duration charged is either measured (--host-time wall: the host's steady clock) or
// modelled (--host-time model), which makes every figure a pure function of the inputs:
//
//   modelled_ns(bytes) = overhead_ns + ceil(bytes / gbps)        (gbps: 10^9 B/s = B/ns)
//
// with the bytes each phase touches (the bench computes them from the descriptors):
//   prepare  token + position tensors of the model, as the descriptors size them (they are
//            rewritten whole: values plus zero fill and tiling padding)
//   rank     greedy: the logits tensor as stored (BF16, tiling padding included) read once
//            and ranked in place (rank_row), no FP32 row: logits.bytes
//   convert  top-k: the logits tensor as stored read, the FP32 row written and ranked in the
//            same pass (read_row_pick): logits.bytes + 4 * vocab
//   sample   top-k: the k candidates' logits and weights, 8 * k
//   ranked   a decode that ranked on the device: its ids' and logits' tensors as stored
// Runtimes without the clock extension (real hardware) cannot be charged: there the device
// clock is real and already contains the host's time.
#pragma once

#include <chrono>
#include <cstdint>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.hpp"
#include "runner/bench/bench_options.hpp"

namespace runner {

// One host phase placed on the device clock: it ended at end_ns and lasted charged_ns
// (modelled or measured, as the mode says).
struct HostSpan {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  int64_t charged_ns = 0;
};

class HostTime {
 public:
  HostTime(HostTimeMode mode, HostTimeModel model, const calrt::Device& device);

  HostTimeMode mode() const { return mode_; }
  // "host-wall" or "host-model": the clock label of host figures in reports.
  const char* clock_label() const;
  // Whether host work can be charged to the device clock (the runtime has CALRT_EXT_CLOCK).
  bool charges_device() const { return static_cast<bool>(clock_); }
  // "virtual", "paced", or "none" (no clock extension).
  const char* device_clock_mode() const;
  uint64_t modelled_ns(uint64_t bytes) const;

  // The device clock now (Clock_Get, or Device_Status on runtimes without the extension).
  int64_t device_now() const;

  // Runs `work` (the host phase itself), then charges its duration to the device.
  template <class Work>
  HostSpan run(uint64_t bytes, Work&& work) {
    const auto start = std::chrono::steady_clock::now();
    work();
    const auto measured = std::chrono::steady_clock::now() - start;
    const int64_t charged =
        mode_ == HostTimeMode::model
            ? static_cast<int64_t>(modelled_ns(bytes))
            : std::chrono::duration_cast<std::chrono::nanoseconds>(measured).count();
    return charge(charged);
  }

 private:
  HostSpan charge(int64_t charged_ns);

  HostTimeMode mode_;
  HostTimeModel model_;
  const calrt::Device& device_;
  calrt::DeviceClock clock_;
};

}  // namespace runner
