// The first-order timing model of one job. Integer picoseconds throughout, so the same job
// always takes the same device time:
//   total = submit_overhead + H2D + compute + D2D + D2H
//   H2D   = input bytes / pcie_bw + pcie_latency        (D2H alike, output bytes)
//   compute = max over chips of sum over the chip's ops of
//             (max(flops / peak(dtype), bytes / dram_bw) + op_overhead),
//             scaled by cur_seq_len / chunk for prefill (the op list describes a full chunk)
//   D2D   = per layer two all-reduces of tokens x hidden FP32 partials, plus the logits
//           gather, each bytes / d2d_bw + d2d_latency (zero on a one-chip calbin)
#pragma once

#include <cstdint>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/device/device_config.hpp"
#include "simdev/device/sim_time.hpp"

namespace simdev {

struct JobCost {
  TimePs submit_ps = 0;
  TimePs h2d_ps = 0;
  std::vector<TimePs> chip_compute_ps;  // per chip
  TimePs compute_ps = 0;                // max over chips
  TimePs d2d_ps = 0;
  TimePs d2h_ps = 0;
  TimePs total_ps = 0;
};

struct JobShape {
  uint64_t tokens = 1;  // cur_seq_len as submitted
  uint64_t chunk = 1;   // tokens the op list describes
};

// Time to move bytes over a link of bandwidth_mbps (1e6 bytes/s), rounded up.
TimePs transfer_ps(uint64_t bytes, uint64_t bandwidth_mbps);
// Time of one op on one chip, overhead included.
TimePs op_ps(const calbin::Op& op, const DeviceConfig& config);

JobCost job_cost(const calbin::Manifest& manifest, const calbin::Model& model,
                 const JobShape& shape, const DeviceConfig& config);

// Uploading the param blocks at configure: bytes over PCIe plus one latency per block.
TimePs configure_ps(uint64_t param_bytes, uint64_t block_count, const DeviceConfig& config);

}  // namespace simdev
