#include "simdev/device/cost_model.hpp"

#include <algorithm>

namespace simdev {
namespace {

__extension__ typedef unsigned __int128 Wide;

TimePs div_up_saturating(Wide numerator, Wide denominator) {
  const Wide value = (numerator + denominator - 1) / denominator;
  return value > Wide{kTimeNever} ? kTimeNever : static_cast<TimePs>(value);
}

uint64_t tensor_bytes_sum(const std::vector<calbin::TensorDesc>& tensors) {
  uint64_t sum = 0;
  for (const auto& tensor : tensors) {
    sum += tensor.bytes;
  }
  return sum;
}

TimePs chip_compute_ps(const calbin::ChipOps& chip_ops, const JobShape& shape,
                       const DeviceConfig& config) {
  TimePs sum = 0;
  for (const calbin::Op& op : chip_ops.ops) {
    sum = saturating_add(sum, op_ps(op, config));
  }
  // The op list describes one full chunk; a partial chunk costs its share, rounded up.
  return div_up_saturating(Wide{sum} * shape.tokens, std::max<uint64_t>(shape.chunk, 1));
}

TimePs d2d_ps(const calbin::Manifest& manifest, const JobShape& shape, const DeviceConfig& config) {
  if (manifest.chips < 2) {
    return 0;
  }
  const TimePs latency = ns_to_ps(config.d2d_latency_ns);
  const uint64_t partial_bytes = shape.tokens * manifest.llm.hidden * sizeof(float);
  const TimePs all_reduce = saturating_add(transfer_ps(partial_bytes, config.d2d_bw_mbps), latency);
  const TimePs gather =
      saturating_add(transfer_ps(uint64_t{manifest.llm.vocab} * 2, config.d2d_bw_mbps), latency);
  return saturating_add(all_reduce * 2 * manifest.llm.layers, gather);
}

}  // namespace

TimePs transfer_ps(uint64_t bytes, uint64_t bandwidth_mbps) {
  // bytes / (mbps * 1e6 B/s) in ps = bytes * 1e6 / mbps.
  return div_up_saturating(Wide{bytes} * 1000000u, std::max<uint64_t>(bandwidth_mbps, 1));
}

TimePs op_ps(const calbin::Op& op, const DeviceConfig& config) {
  const bool int8 = op.dtype == calbin::Dtype::kInt8 || op.dtype == calbin::Dtype::kInt4;
  const uint64_t peak_gops = int8 ? config.peak_int8_gops : config.peak_bf16_gops;
  // flops / (gops * 1e9 op/s) in ps = flops * 1000 / gops.
  const TimePs math = div_up_saturating(Wide{op.flops} * 1000u, std::max<uint64_t>(peak_gops, 1));
  const TimePs memory = transfer_ps(op.bytes, config.dram_bw_mbps);
  return saturating_add(std::max(math, memory), ns_to_ps(config.op_overhead_ns));
}

JobCost job_cost(const calbin::Manifest& manifest, const calbin::Model& model,
                 const JobShape& shape, const DeviceConfig& config) {
  JobCost cost;
  const TimePs link_latency = ns_to_ps(config.pcie_latency_ns);
  cost.submit_ps = ns_to_ps(config.submit_overhead_ns);
  cost.h2d_ps = saturating_add(transfer_ps(tensor_bytes_sum(model.inputs), config.pcie_bw_mbps),
                               link_latency);
  cost.d2h_ps = saturating_add(transfer_ps(tensor_bytes_sum(model.outputs), config.pcie_bw_mbps),
                               link_latency);
  for (const calbin::ChipOps& chip_ops : model.ops) {
    const TimePs chip_ps = chip_compute_ps(chip_ops, shape, config);
    cost.chip_compute_ps.push_back(chip_ps);
    cost.compute_ps = std::max(cost.compute_ps, chip_ps);
  }
  cost.d2d_ps = d2d_ps(manifest, shape, config);
  cost.total_ps =
      saturating_add(saturating_add(saturating_add(cost.submit_ps, cost.h2d_ps), cost.compute_ps),
                     saturating_add(cost.d2d_ps, cost.d2h_ps));
  return cost;
}

TimePs configure_ps(uint64_t param_bytes, uint64_t block_count, const DeviceConfig& config) {
  const TimePs latency = ns_to_ps(config.pcie_latency_ns);
  return saturating_add(transfer_ps(param_bytes, config.pcie_bw_mbps),
                        latency * std::max<uint64_t>(block_count, 1));
}

}  // namespace simdev
