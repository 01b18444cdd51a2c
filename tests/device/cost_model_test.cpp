// The first-order timing model: integer, monotonic in work, and scaled by tokens.
#include <gtest/gtest.h>

#include "simdev/device/cost_model.hpp"

namespace simdev {
namespace {

calbin::Manifest two_chip_manifest() {
  calbin::Manifest m;
  m.chips = 2;
  m.llm.hidden = 128;
  m.llm.layers = 2;
  m.llm.vocab = 1000;
  return m;
}

calbin::Model model_with(uint64_t flops, uint64_t bytes) {
  calbin::Model model;
  model.type = calbin::ModelType::kPrefill;
  calbin::TensorDesc in;
  in.bytes = 2048;
  model.inputs = {in};
  calbin::TensorDesc out;
  out.bytes = 2000;
  model.outputs = {out};
  calbin::Op op;
  op.dtype = calbin::Dtype::kInt8;
  op.flops = flops;
  op.bytes = bytes;
  model.ops = {calbin::ChipOps{0, {op, op}}, calbin::ChipOps{1, {op}}};
  return model;
}

TEST(CostModel, TransferIsBytesOverBandwidthRoundedUp) {
  EXPECT_EQ(transfer_ps(1000000, 1000000), 1000000u);  // 1 MB at 1 TB/s = 1 us
  EXPECT_EQ(transfer_ps(1, 3), 333334u);
  EXPECT_EQ(transfer_ps(0, 5), 0u);
}

TEST(CostModel, OpTimeIsTheSlowerOfMathAndMemory) {
  DeviceConfig config;
  config.op_overhead_ns = 0;
  calbin::Op op;
  op.dtype = calbin::Dtype::kInt8;
  op.flops = config.peak_int8_gops * 1000;  // 1 us of math
  op.bytes = 0;
  EXPECT_EQ(op_ps(op, config), kPsPerUs);
  op.bytes = config.dram_bw_mbps * 2;  // 2 us of memory
  EXPECT_EQ(op_ps(op, config), 2 * kPsPerUs);
  op.dtype = calbin::Dtype::kBf16;  // half the peak: 2 us of math, 2 us of memory
  EXPECT_EQ(op_ps(op, config), 2 * kPsPerUs);
}

TEST(CostModel, MonotonicInWorkAndTokens) {
  DeviceConfig config;
  const auto manifest = two_chip_manifest();
  TimePs previous = 0;
  for (uint64_t flops : {uint64_t{0}, uint64_t{1} << 20, uint64_t{1} << 30, uint64_t{1} << 40}) {
    const JobCost cost = job_cost(manifest, model_with(flops, 4096), {256, 256}, config);
    EXPECT_GE(cost.total_ps, previous);
    previous = cost.total_ps;
  }
  previous = 0;
  for (uint64_t tokens : {1u, 2u, 17u, 128u, 256u}) {
    const JobCost cost = job_cost(manifest, model_with(1u << 30, 4096), {tokens, 256}, config);
    EXPECT_GT(cost.total_ps, previous) << tokens;
    previous = cost.total_ps;
  }
}

TEST(CostModel, SlowestChipDecidesAndPartsAddUp) {
  DeviceConfig config;
  const JobCost cost = job_cost(two_chip_manifest(), model_with(1u << 30, 0), {256, 256}, config);
  ASSERT_EQ(cost.chip_compute_ps.size(), 2u);
  EXPECT_EQ(cost.compute_ps, cost.chip_compute_ps[0]);
  EXPECT_GT(cost.chip_compute_ps[0], cost.chip_compute_ps[1]);
  EXPECT_EQ(cost.total_ps,
            cost.submit_ps + cost.h2d_ps + cost.compute_ps + cost.d2d_ps + cost.d2h_ps);
}

}  // namespace
}  // namespace simdev
