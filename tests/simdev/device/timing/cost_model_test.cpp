// The timing model on small hand-built op lists: exact integer times, segments cut at the
// tensor-parallel reductions, and each part of an op scaled the way the README says.
#include <gtest/gtest.h>

#include <initializer_list>
#include <limits>
#include <string>
#include <vector>

#include "simdev/device/timing/cost_model.hpp"

namespace simdev {
namespace {

using calbin::Dtype;

// Round rates so that expected times are easy to write down: INT8 1e12 op/s, BF16 5e11
// op/s, DRAM 1e12 B/s, all at 100 %, no per-op overhead.
DeviceConfig round_config() {
  DeviceConfig c;
  c.compute_cores = 1;
  c.clock_mhz = 1000;
  c.int8_macs_per_cycle_per_core = 500;
  c.bf16_macs_per_cycle_per_core = 250;
  c.compute_efficiency_pct = 100;
  c.dram_bw_mbps = 1000000;
  c.dram_efficiency_pct = 100;
  c.op_overhead_ns = 0;
  return c;
}

calbin::Op make_op(std::string type, int layer, std::initializer_list<uint64_t> shape, Dtype dtype,
                   uint64_t flops, uint64_t bytes) {
  calbin::Op op;
  op.type = std::move(type);
  op.name = op.type;
  op.layer = layer;
  for (const uint64_t dim : shape) {
    op.shape.push_back(static_cast<int64_t>(dim));
  }
  op.dtype = dtype;
  op.flops = flops;
  op.bytes = bytes;
  return op;
}

constexpr uint64_t kChunk = 256;
constexpr uint64_t kHidden = 64;
constexpr uint64_t kVocab = 1000;

calbin::Op allreduce(int layer) {
  return make_op("d2d_allreduce", layer, {kChunk, kHidden}, Dtype::kF32, kChunk * kHidden,
                 2 * kChunk * kHidden * 4);
}

calbin::Op attention(int layer) {
  // 4 heads of 16 over the chunk, causal: 4 x pairs x heads x dim FLOPs.
  calbin::Op op = make_op("flash_attention", layer, {kChunk, 4, 16}, Dtype::kBf16,
                          4 * (kChunk * (kChunk + 1) / 2) * 4 * 16, 0);
  op.kv_bytes = 2 * 2 * 16 * kChunk * 2;  // K and V, 2 heads, bf16
  op.bytes = op.kv_bytes + 2 * kChunk * 4 * 16 * 2;
  op.kv_slots = kChunk;
  return op;
}

calbin::Op matmul(int layer, uint64_t out, uint64_t in) {
  calbin::Op op =
      make_op("quant_matmul_add", layer, {kChunk, out, in}, Dtype::kInt8, 2 * kChunk * out * in, 0);
  op.weight_bytes = out * in + out * 4;
  op.bytes = op.weight_bytes + kChunk * (in + out) * 2;
  return op;
}

calbin::Op experts_op(int layer, uint32_t experts, uint64_t per_expert) {
  calbin::Op op = make_op("moe_grouped_dense", layer, {kChunk * 2, 32, kHidden}, Dtype::kF16,
                          2 * kChunk * 2 * 32 * kHidden, 0);
  op.weight_bytes = experts * per_expert;
  op.experts = experts;
  op.bytes = op.weight_bytes + kChunk * 2 * (32 + kHidden) * 2;
  return op;
}

// A two-layer MoE graph as the generator lays it out: embedding, per layer an attention part
// and an MoE part each closed by an all-reduce, then the head closed by the logits gather.
std::vector<calbin::Op> moe_graph() {
  std::vector<calbin::Op> ops;
  ops.push_back(make_op("embedding", -1, {kChunk, kHidden}, Dtype::kBf16, 0, kChunk * 260));
  for (int l = 0; l < 2; ++l) {
    ops.push_back(matmul(l, 128, kHidden));
    ops.push_back(attention(l));
    ops.push_back(allreduce(l));
    ops.push_back(
        make_op("moe_topk_router", l, {kChunk, 16}, Dtype::kF32, 6 * kChunk * 16, kChunk * 16 * 4));
    ops.push_back(experts_op(l, 16, 4096));
    ops.push_back(allreduce(l));
  }
  calbin::Op head = matmul(-1, kVocab / 2, kHidden);
  head.shape = {1, kVocab / 2, kHidden};
  ops.push_back(head);
  ops.push_back(make_op("d2d_gather", -1, {1, kVocab}, Dtype::kBf16, 0, 4 * kVocab));
  return ops;
}

calbin::Manifest manifest_for(uint32_t chips) {
  calbin::Manifest m;
  m.chips = chips;
  m.llm.hidden = kHidden;
  m.llm.layers = 2;
  m.llm.vocab = kVocab;
  m.llm.experts = 16;
  m.llm.active_experts = 2;
  return m;
}

calbin::Model model_for(std::vector<calbin::ChipOps> ops) {
  calbin::Model model;
  model.type = calbin::ModelType::kPrefill;
  calbin::TensorDesc tokens;
  tokens.bytes = kChunk * 4;
  model.inputs = {tokens, tokens};
  calbin::TensorDesc logits;
  logits.bytes = kVocab * 2;
  model.outputs = {logits};
  model.ops = std::move(ops);
  return model;
}

calbin::Model two_chip_model() { return model_for({{0, moe_graph()}, {1, moe_graph()}}); }

// One segment holding one op on chip 0, for exact per-op checks.
Segment only_segment(const calbin::Op& op, const JobShape& shape) {
  calbin::Manifest m = manifest_for(1);
  const JobCost cost = job_cost(m, model_for({{0, {op}}}), shape, round_config());
  EXPECT_EQ(cost.segments.size(), 1u);
  return cost.segments.empty() ? Segment{} : cost.segments[0];
}

TEST(CostModel, TransferAndDurationAreExactAndRoundUp) {
  EXPECT_EQ(transfer_ps(1000000, 1000000), 1000000u);  // 1 MB at 1 TB/s = 1 us
  EXPECT_EQ(transfer_ps(1, 3), 333334u);
  EXPECT_EQ(transfer_ps(0, 5), 0u);
  EXPECT_EQ(duration_ps(1, Rate{3, 1}), 333333333334u);  // 1 / 3 s
  EXPECT_EQ(duration_ps(130, Rate{128, 130}), 132031250000000u);
  EXPECT_EQ(duration_ps(0, Rate{0, 1}), 0u);
  EXPECT_EQ(duration_ps(1, Rate{0, 1}), kTimeNever);
  EXPECT_EQ(duration_ps(std::numeric_limits<uint64_t>::max(), Rate{1, 1}), kTimeNever);
}

TEST(CostModel, OpTimeIsTheSlowerOfMathAndMemoryAtTheAchievedRates) {
  DeviceConfig config = round_config();
  calbin::Op op = make_op("x", 0, {1}, Dtype::kInt8, 1000000, 0);  // 1 us at 1e12 op/s
  EXPECT_EQ(op_ps(op, config), kPsPerUs);
  op.bytes = 2000000;  // 2 us at 1e12 B/s
  EXPECT_EQ(op_ps(op, config), 2 * kPsPerUs);
  op.dtype = Dtype::kBf16;  // half the peak: 2 us of math, 2 us of memory
  EXPECT_EQ(op_ps(op, config), 2 * kPsPerUs);
  op.dtype = Dtype::kF16;
  op.flops = 2000000;
  EXPECT_EQ(op_ps(op, config), 4 * kPsPerUs);
  op.dtype = Dtype::kInt4;  // INT4 weights run at the INT8 rate
  EXPECT_EQ(op_ps(op, config), 2 * kPsPerUs);
  config.compute_efficiency_pct = 50;
  EXPECT_EQ(op_ps(op, config), 4 * kPsPerUs);
  config.dram_efficiency_pct = 25;
  EXPECT_EQ(op_ps(op, config), 8 * kPsPerUs);
  config.op_overhead_ns = 3;
  EXPECT_EQ(op_ps(op, config), 8 * kPsPerUs + 3000);
}

TEST(CostModel, ExpectedDistinctExperts) {
  EXPECT_EQ(expected_experts_fixed(128, 8, 0), 0u);
  EXPECT_EQ(expected_experts_fixed(128, 8, 1), 8 * kExpertUnit);  // exactly k
  // 128 x (1 - (15/16)^2) = 15.5 experts, exact in binary.
  EXPECT_EQ(expected_experts_fixed(128, 8, 2), 31 * kExpertUnit / 2);
  EXPECT_EQ(expected_experts_fixed(16, 16, 3), 16 * kExpertUnit);
  EXPECT_EQ(expected_experts_fixed(0, 0, 3), 0u);
  uint64_t previous = 0;
  for (uint64_t tokens : {1u, 2u, 4u, 16u, 64u, 256u, 4096u}) {
    const uint64_t now = expected_experts_fixed(128, 8, tokens);
    EXPECT_GT(now, previous) << tokens;
    EXPECT_LE(now, 128 * kExpertUnit) << tokens;
    previous = now;
  }
  // 256 tokens miss an expert with probability (15/16)^256 < 1e-7.
  EXPECT_GT(expected_experts_fixed(128, 8, 256), 128 * kExpertUnit - kExpertUnit / 1000);
}

TEST(CostModel, SegmentsFollowTheReductions) {
  const DeviceConfig config;
  const JobCost cost = job_cost(manifest_for(2), two_chip_model(), {kChunk, kChunk, 0}, config);
  const std::vector<std::pair<std::string, int>> expected = {
      {"embed", -1}, {"attention", 0}, {"moe", 0}, {"attention", 1}, {"moe", 1}, {"lm_head", -1}};
  ASSERT_EQ(cost.segments.size(), expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    const Segment& s = cost.segments[k];
    EXPECT_EQ(s.label, expected[k].first) << k;
    EXPECT_EQ(s.layer, expected[k].second) << k;
    ASSERT_EQ(s.chips.size(), 2u);
    EXPECT_EQ(s.chips[0].ps, s.chips[1].ps) << k;
    EXPECT_GT(s.chips[0].ps, 0u) << k;
  }
  EXPECT_EQ(cost.segments[0].d2d_ps, 0u);  // no reduction after the embedding
  // An all-reduce of 256 x 64 FP32 partial sums: each chip receives the other's 65536 bytes.
  const TimePs latency = config.d2d_latency_ns * kPsPerNs;
  EXPECT_EQ(cost.segments[1].d2d_bytes, kChunk * kHidden * 4);
  EXPECT_EQ(cost.segments[1].d2d_ps, latency + 655360);  // 65536 B at 1e11 B/s
  // The gather brings the other chip's half of the BF16 logits row to chip 0.
  EXPECT_EQ(cost.segments[5].d2d_bytes, kVocab);
  EXPECT_EQ(cost.segments[5].d2d_ps, latency + 10000);
}

TEST(CostModel, OneChipCalbinHasNoD2dAndAChipWithoutOpsTakesZero) {
  const JobShape full{kChunk, kChunk, 0};
  const JobCost one = job_cost(manifest_for(1), model_for({{0, moe_graph()}}), full, {});
  ASSERT_EQ(one.segments.size(), 6u);
  for (const Segment& s : one.segments) {
    EXPECT_EQ(s.d2d_ps, 0u);
    EXPECT_EQ(s.d2d_bytes, 0u);
    EXPECT_EQ(s.chips.size(), 1u);
  }
  const JobCost lopsided = job_cost(manifest_for(2), model_for({{1, moe_graph()}}), full, {});
  ASSERT_EQ(lopsided.segments.size(), 6u);
  for (const Segment& s : lopsided.segments) {
    ASSERT_EQ(s.chips.size(), 2u);
    EXPECT_EQ(s.chips[0].ps, 0u);
    EXPECT_EQ(s.chips_ps(), s.chips[1].ps);
  }
  // Op lists for chips the calbin does not have are not run.
  const JobCost stray =
      job_cost(manifest_for(1), model_for({{0, moe_graph()}, {3, moe_graph()}}), full, {});
  EXPECT_EQ(stray.compute_ps(), one.compute_ps());
}

TEST(CostModel, SlowestChipDecidesAndPartsAddUp) {
  std::vector<calbin::Op> heavier = moe_graph();
  heavier[1].flops *= 1000;  // layer 0's first matmul on chip 1 only
  const JobCost cost = job_cost(manifest_for(2), model_for({{0, moe_graph()}, {1, heavier}}),
                                {kChunk, kChunk, 0}, DeviceConfig{});
  EXPECT_GT(cost.segments[1].chips[1].ps, cost.segments[1].chips[0].ps);
  EXPECT_EQ(cost.segments[1].chips_ps(), cost.segments[1].chips[1].ps);
  TimePs compute = 0;
  for (const Segment& s : cost.segments) {
    EXPECT_EQ(s.total_ps(), s.chips_ps() + s.d2d_ps);
    compute += s.total_ps();
  }
  EXPECT_EQ(cost.compute_ps(), compute);
  EXPECT_EQ(cost.total_ps(), cost.submit_ps + cost.h2d_ps + compute + cost.d2h_ps);
  EXPECT_EQ(cost.submit_ps, 20000 * kPsPerNs);
  EXPECT_EQ(cost.h2d_bytes, 2 * kChunk * 4);
  EXPECT_EQ(cost.d2h_bytes, kVocab * 2);
}

TEST(CostModel, PartialChunkKeepsWeightReadsAndScalesTheRest) {
  const calbin::Op op = matmul(0, 128, kHidden);
  const uint64_t activations = op.bytes - op.weight_bytes;
  for (uint64_t tokens : {uint64_t{1}, uint64_t{17}, uint64_t{128}, kChunk}) {
    const Segment s = only_segment(op, {tokens, kChunk, 0});
    EXPECT_EQ(s.chips[0].flops, op.flops * tokens / kChunk) << tokens;
    EXPECT_EQ(s.chips[0].bytes, op.weight_bytes + activations * tokens / kChunk) << tokens;
  }
  // Without the breakdown every byte counts as activation traffic.
  calbin::Op unknown = op;
  unknown.weight_bytes = 0;
  EXPECT_EQ(only_segment(unknown, {1, kChunk, 0}).chips[0].bytes, (op.bytes + kChunk - 1) / kChunk);
}

TEST(CostModel, AttentionGrowsWithPastAndTokens) {
  const calbin::Op op = attention(0);
  const uint64_t per_pair = op.flops / (kChunk * (kChunk + 1) / 2);
  const uint64_t kv_per_slot = op.kv_bytes / kChunk;
  const uint64_t qo_per_token = (op.bytes - op.kv_bytes) / kChunk;
  for (const JobShape shape : {JobShape{kChunk, kChunk, 0}, JobShape{100, kChunk, 1000},
                               JobShape{1, kChunk, 4095}, JobShape{kChunk, kChunk, 40704}}) {
    const uint64_t pairs = shape.tokens * shape.past + shape.tokens * (shape.tokens + 1) / 2;
    const Segment s = only_segment(op, shape);
    EXPECT_EQ(s.chips[0].flops, per_pair * pairs) << shape.tokens << " after " << shape.past;
    EXPECT_EQ(s.chips[0].bytes,
              kv_per_slot * (shape.past + shape.tokens) + qo_per_token * shape.tokens);
  }
  // A decode op lists one query against the whole context; a step reads past + 1 slots.
  calbin::Op decode = op;
  decode.shape = {1, 4, 16};
  decode.kv_slots = 4096;
  decode.flops = 4 * 4096 * 4 * 16;
  decode.kv_bytes = 2 * 2 * 16 * 4096 * 2;
  decode.bytes = decode.kv_bytes + 2 * 4 * 16 * 2;
  const Segment step = only_segment(decode, {1, 1, 99});
  EXPECT_EQ(step.chips[0].flops, 4 * 100 * 4 * 16u);
  EXPECT_EQ(step.chips[0].bytes, 2 * 2 * 16 * 100 * 2 + 2 * 4 * 16 * 2u);
}

TEST(CostModel, MoeReadsTheExpectedDistinctExperts) {
  // The op lists all 16 experts (a full chunk); the model has 16 experts, 2 active.
  const calbin::Op op = experts_op(0, 16, 4096);
  const uint64_t activations = op.bytes - op.weight_bytes;
  const Segment one = only_segment(op, {1, kChunk, 0});
  // 1 token: 2 experts; activations 1/256 of the chunk's, rounded up.
  EXPECT_EQ(one.chips[0].bytes, 2 * 4096 + (activations + kChunk - 1) / kChunk);
  const Segment two = only_segment(op, {2, kChunk, 0});
  // 16 x (1 - (7/8)^2) = 3.75 experts.
  EXPECT_EQ(two.chips[0].bytes, 15 * 4096 / 4 + (2 * activations + kChunk - 1) / kChunk);
  const Segment full = only_segment(op, {kChunk, kChunk, 0});
  EXPECT_LE(full.chips[0].bytes, op.bytes);
  EXPECT_GT(full.chips[0].bytes, op.bytes - 4096 / 1000);
  // A decode op lists the 2 experts of its one token; the same step reads the same bytes.
  calbin::Op decode = experts_op(0, 2, 4096);
  decode.bytes = decode.weight_bytes + 2 * (32 + kHidden) * 2;
  EXPECT_EQ(only_segment(decode, {1, 1, 0}).chips[0].bytes, decode.bytes);
}

TEST(CostModel, TheHeadCostsTheSameForAnyTokenCount) {
  const DeviceConfig config;
  const JobCost full = job_cost(manifest_for(2), two_chip_model(), {kChunk, kChunk, 0}, config);
  const JobCost one = job_cost(manifest_for(2), two_chip_model(), {1, kChunk, 0}, config);
  EXPECT_EQ(full.segments.back().chips, one.segments.back().chips);
  EXPECT_EQ(full.segments.back().total_ps(), one.segments.back().total_ps());
  EXPECT_LT(one.segments[1].chips[0].flops, full.segments[1].chips[0].flops);
}

TEST(CostModel, MonotonicInTokensAndPast) {
  const DeviceConfig config;
  TimePs previous = 0;
  for (uint64_t tokens : {1u, 2u, 17u, 128u, 256u}) {
    const JobCost cost = job_cost(manifest_for(2), two_chip_model(), {tokens, kChunk, 0}, config);
    EXPECT_GT(cost.total_ps(), previous) << tokens;
    previous = cost.total_ps();
  }
  previous = 0;
  for (uint64_t past : {0u, 256u, 4096u, 40000u}) {
    const JobCost cost =
        job_cost(manifest_for(2), two_chip_model(), {kChunk, kChunk, past}, config);
    EXPECT_GT(cost.total_ps(), previous) << past;
    previous = cost.total_ps();
  }
}

TEST(CostModel, TransfersAndConfigureUseThePcieLink) {
  const DeviceConfig config;  // gen 4 x16 at 80 %: 16e9 x 16 x 128/130 / 8 x 0.8 B/s
  const JobCost cost = job_cost(manifest_for(2), two_chip_model(), {kChunk, kChunk, 0}, config);
  // 2048 B: 2048 x 1e12 x 130 x 8 x 100 / (16e9 x 16 x 128 x 80) ps, rounded up.
  // That is 39.67... ps per byte, 25.2 GB/s.
  EXPECT_EQ(cost.h2d_ps, 81250u + 2000000u);
  EXPECT_EQ(cost.d2h_ps, 79346u + 2000000u);  // 2000 B: 79345.70... ps
  EXPECT_EQ(configure_ps(2048, 3, config), 81250u + 3 * 2000000u);
  EXPECT_EQ(configure_ps(0, 0, config), 2000000u);
}

void expect_same_cost(const JobCost& got, const JobCost& want, const std::string& where) {
  EXPECT_EQ(got.total_ps(), want.total_ps()) << where;
  ASSERT_EQ(got.segments.size(), want.segments.size()) << where;
  for (size_t k = 0; k < want.segments.size(); ++k) {
    const Segment& a = got.segments[k];
    const Segment& b = want.segments[k];
    EXPECT_EQ(a.chips, b.chips) << where << " segment " << k;
    EXPECT_EQ(a.d2d_ps, b.d2d_ps) << where << " segment " << k;
    EXPECT_EQ(a.d2d_bytes, b.d2d_bytes) << where << " segment " << k;
    EXPECT_EQ(a.layer, b.layer) << where << " segment " << k;
    EXPECT_STREQ(a.label, b.label) << where << " segment " << k;
  }
}

// The device keeps one plan per model for its whole life: the sums it keeps per (tokens,
// chunk) must give every later job what a plan seeing that job first gives, whatever came
// before, including after the kept sums were replaced (more shapes than it keeps).
TEST(CostPlan, KeptSumsGiveWhatAFreshPlanGives) {
  const calbin::Manifest manifest = manifest_for(2);
  const calbin::Model model = two_chip_model();
  const DeviceConfig config;
  CostPlan kept(manifest, model, config);
  std::vector<JobShape> shapes;
  for (uint64_t past = 0; past < 600; past += 37) {
    shapes.push_back({1, 1, past});  // decode: only the attention ops change
    if (past % 3 == 0) {
      shapes.push_back({kChunk, kChunk, past});
      shapes.push_back({past % kChunk + 1, kChunk, past});  // a last, partial chunk
    }
  }
  for (const JobShape& shape : shapes) {
    const std::string where = "tokens " + std::to_string(shape.tokens) + " chunk " +
                              std::to_string(shape.chunk) + " past " + std::to_string(shape.past);
    expect_same_cost(kept.cost(shape), CostPlan(manifest, model, config).cost(shape), where);
    expect_same_cost(kept.cost(shape), job_cost(manifest, model, shape, config), where);
  }
  // The attention ops are recomputed: a longer KV read costs more on the same kept sums.
  EXPECT_LT(kept.cost({1, 1, 0}).compute_ps(), kept.cost({1, 1, 100000}).compute_ps());
}

TEST(CostModel, HugeWorkSaturatesInsteadOfWrapping) {
  calbin::Op op = make_op("x", 0, {1}, Dtype::kBf16, std::numeric_limits<uint64_t>::max(),
                          std::numeric_limits<uint64_t>::max());
  DeviceConfig slow;
  slow.compute_cores = 1;
  slow.clock_mhz = 1;
  slow.bf16_macs_per_cycle_per_core = 1;
  slow.compute_efficiency_pct = 1;
  slow.op_overhead_ns = std::numeric_limits<uint64_t>::max() / 2000;
  EXPECT_EQ(op_ps(op, slow), kTimeNever);
  const JobCost cost = job_cost(manifest_for(1), model_for({{0, {op, op}}}),
                                {std::numeric_limits<uint64_t>::max(), 1, 1u << 30}, slow);
  EXPECT_EQ(cost.compute_ps(), kTimeNever);
  EXPECT_EQ(cost.total_ps(), kTimeNever);
}

}  // namespace
}  // namespace simdev
