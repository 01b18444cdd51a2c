// The timing model against physics on the reference model (Qwen3-30B-A3B, timing-only
// calbin). Every expected value is derived here from the device config's constants and the
// manifest's model facts and weight sizes, by hand: never through the model's own helpers
// (peak rates, link rates, duration_ps). What the test checks:
//   (a) a decode step takes at least the time to read its active bytes (attention and router
//       weights, the 8 active experts' slices, lm_head, the KV read so far) at the DRAM
//       bandwidth of both chips, and not much more than that at the achieved bandwidth;
//   (b) prefill time follows the FLOPs: exactly (1 %) on a device where only compute costs,
//       and on the default device between the weight-pass count and the FLOP ratio (an MoE
//       chunk of 256 tokens is bound by reading all 128 experts); the marginal cost of
//       context is the extra attention FLOPs at the achieved BF16 rate;
//   (c) H2D and D2H take bytes / (lanes x GT/s x 128/130 / 8 x efficiency) + latency, exactly;
//   (d) MoE layers read the distinct experts a submission touches: 1 token reads k/E of the
//       expert weights, many tokens approach all of them.
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "calbin/manifest.hpp"
#include "simdev/device/timing/cost_model.hpp"
#include "simdev/gen/generate.hpp"

namespace simdev {
namespace {

namespace fs = std::filesystem;

__extension__ typedef unsigned __int128 Wide;

constexpr double kPs = 1e12;  // picoseconds per second, for the double-precision estimates

double dbl(uint64_t value) { return static_cast<double>(value); }

const calbin::Manifest& reference() {
  static const calbin::Manifest manifest = [] {
    const char* fixture = std::getenv("CALRT_TEST_REFERENCE_CALBIN");
    if (fixture != nullptr && fs::exists(fs::path(fixture) / "manifest.json")) {
      auto read = calbin::read_manifest(fixture);
      EXPECT_TRUE(read.has_value()) << read.error().to_string();
      return read.value_or(calbin::Manifest{});
    }
    // Run directly (not through ctest): generate it into a scratch directory.
    gen::GenOptions options;
    options.preset = "qwen3-30b-a3b";
    options.out_dir =
        fs::temp_directory_path() / ("timing_physics_test-" + std::to_string(::getpid()));
    options.force = true;
    options.long_cases = false;
    options.command_line = "timing_physics_test";
    auto made = gen::generate(options);
    EXPECT_TRUE(made.has_value()) << made.error().to_string();
    std::error_code ignored;
    fs::remove_all(options.out_dir, ignored);
    return made.value_or(calbin::Manifest{});
  }();
  return manifest;
}

const calbin::Model& model_of(calbin::ModelType type) {
  for (const calbin::Model& model : reference().models) {
    if (model.type == type) {
      return model;
    }
  }
  ADD_FAILURE() << "the reference calbin has no " << calbin::to_string(type) << " model";
  static const calbin::Model none;
  return none;
}

// Bytes one copy of a weight shard occupies: data plus its f32 scales.
uint64_t stored_bytes(const calbin::WeightTensor& w) { return w.bytes + w.quant.scale_count * 4; }

// Weight bytes by role summed over every chip that holds a copy (replicated tensors are
// read by each chip); `chip` >= 0 restricts to that chip, `layer` >= 0 to that layer.
std::map<std::string, uint64_t> weight_bytes_by_role(int chip = -1, int layer = -1) {
  std::map<std::string, uint64_t> bytes;
  for (const calbin::WeightTensor& w : reference().weights) {
    if (layer >= 0 && w.layer != layer) {
      continue;
    }
    const uint32_t mask = chip < 0 ? w.shard.chip_mask : w.shard.chip_mask & (1u << chip);
    bytes[w.role] += stored_bytes(w) * static_cast<uint64_t>(std::popcount(mask));
  }
  return bytes;
}

bool is_expert_role(const std::string& role) {
  return role.rfind("moe_", 0) == 0 && role != "moe_router";
}

// PCIe payload rate by hand: GT/s per lane by generation, 128b/130b line code, 8 bits a byte.
uint64_t gigatransfers(uint64_t gen) { return gen == 3 ? 8 : gen == 4 ? 16 : 32; }

TimePs expected_link_ps(uint64_t bytes, const DeviceConfig& c) {
  // bytes / (lanes * GT * 1e9 * 128/130 / 8 * pct/100) seconds, in ps, rounded up.
  const Wide num = Wide{bytes} * 1000000000000u * 130 * 8 * 100;
  const Wide den =
      Wide{c.pcie_lanes} * gigatransfers(c.pcie_gen) * 1000000000u * 128 * c.pcie_efficiency_pct;
  return static_cast<TimePs>((num + den - 1) / den) + c.pcie_latency_ns * 1000;
}

double peak_ops(const DeviceConfig& c, uint64_t macs) {
  return static_cast<double>(c.compute_cores) * static_cast<double>(macs) * 2.0 *
         static_cast<double>(c.clock_mhz) * 1e6;
}

// A device whose memory, links and fixed costs are free: only compute takes time.
DeviceConfig compute_only() {
  DeviceConfig c;
  c.dram_bw_mbps = 1000000000;
  c.dram_efficiency_pct = 100;
  c.d2d_bw_mbps = 1000000000;
  c.d2d_latency_ns = 0;
  c.op_overhead_ns = 0;
  return c;
}

// Model FLOPs of a prompt on one chip, split by the unit that runs them: W8A8 matmuls on the
// INT8 peak; W4AF16 experts, attention and the elementwise ops at the 16-bit peak. The
// elementwise ops (norms, RoPE, SiLU, top-k, all-reduce adds) are left out: < 0.2 % here.
struct ChipFlops {
  double int8 = 0;
  double bf16 = 0;
};

ChipFlops prompt_flops(uint64_t prompt, uint64_t chunk) {
  const calbin::LlmInfo& llm = reference().llm;
  const double chips = reference().chips;
  const double h = llm.hidden, d = llm.head_dim, q = llm.q_heads / chips, kv = llm.kv_heads / chips,
               f = llm.ffn / chips;
  const double tokens = static_cast<double>(prompt);
  const double chunks = std::ceil(tokens / static_cast<double>(chunk));
  // Per token and layer: q, k/v and o projections and the replicated router (INT8), the
  // active experts' gate, up and down slices (16-bit).
  const double w8_per_token =
      2 * h * q * d + 2 * h * 2 * kv * d + 2 * q * d * h + 2 * h * llm.experts;
  const double experts_per_token = llm.active_experts * 3 * 2 * h * f;
  // Attention: QK^T and PV, 4 FLOPs per (query, key) pair, head and dimension; causal.
  const double pairs = tokens * (tokens + 1) / 2;
  ChipFlops out;
  out.int8 = llm.layers * tokens * w8_per_token + chunks * 2 * h * (llm.vocab / chips);
  out.bf16 = llm.layers * (tokens * experts_per_token + 4 * pairs * q * d);
  return out;
}

// Compute time those FLOPs need at the config's achieved rates, in ps.
double flops_ps(const ChipFlops& flops, const DeviceConfig& c) {
  const double eff = static_cast<double>(c.compute_efficiency_pct) / 100.0;
  return (flops.int8 / (peak_ops(c, c.int8_macs_per_cycle_per_core) * eff) +
          flops.bf16 / (peak_ops(c, c.bf16_macs_per_cycle_per_core) * eff)) *
         kPs;
}

// A prompt prefilled chunk by chunk, as the runner submits it: the modelled compute time.
TimePs prefill_compute_ps(uint64_t prompt, const DeviceConfig& config) {
  const calbin::Model& prefill = model_of(calbin::ModelType::kPrefill);
  const uint64_t chunk = reference().llm.prefill_chunk;
  TimePs total = 0;
  for (uint64_t past = 0; past < prompt; past += chunk) {
    const uint64_t tokens = std::min(chunk, prompt - past);
    total += job_cost(reference(), prefill, JobShape{tokens, chunk, past}, config).compute_ps();
  }
  return total;
}

double ms(double ps) { return ps / 1e9; }

TEST(TimingPhysics, ReferenceFacts) {
  const calbin::Manifest& m = reference();
  ASSERT_EQ(m.llm.layers, 48u);
  ASSERT_EQ(m.llm.experts, 128u);
  ASSERT_EQ(m.llm.active_experts, 8u);
  ASSERT_EQ(m.llm.prefill_chunk, 256u);
  ASSERT_EQ(m.chips, 2u);
  ASSERT_EQ(m.llm.k_dtype, calbin::Dtype::kBf16);
  ASSERT_EQ(m.llm.v_dtype, calbin::Dtype::kBf16);
}

// (a) Decode is bound by the bytes it must read per token.
TEST(TimingPhysics, DecodeStepReadsItsActiveBytesAtTheDramBandwidth) {
  const calbin::Manifest& m = reference();
  const DeviceConfig config;
  const calbin::Model& decode = model_of(calbin::ModelType::kDecode);
  const auto roles = weight_bytes_by_role();
  double dense = 0;    // read whole every step
  double experts = 0;  // all experts; a token reads k/E of them
  for (const auto& [role, bytes] : roles) {
    if (role == "embedding") {
      continue;  // one row per token, counted below
    }
    (is_expert_role(role) ? experts : dense) += static_cast<double>(bytes);
  }
  const double k_over_e = static_cast<double>(m.llm.active_experts) / m.llm.experts;
  // One embedding row (bf16) on each chip.
  const double embedding_row = 2.0 * m.llm.hidden * m.chips;
  const double aggregate_bw = static_cast<double>(config.dram_bw_mbps) * 1e6 * m.chips;
  const double achieved_bw = aggregate_bw * dbl(config.dram_efficiency_pct) / 100.0;
  size_t ops = 0;
  size_t reductions = 0;
  for (const calbin::Op& op : decode.ops.at(0).ops) {
    ++ops;
    reductions += op.type.rfind("d2d_", 0) == 0 ? 1 : 0;
  }
  for (const uint64_t past : {uint64_t{0}, uint64_t{4095}, uint64_t{m.llm.context - 1}}) {
    // K and V of every layer and KV head for past + 1 positions, bf16.
    const double kv = 2.0 * m.llm.layers * m.llm.kv_heads * m.llm.head_dim * dbl(past + 1) * 2;
    const double active = dense + experts * k_over_e + embedding_row + kv;
    const JobCost cost = job_cost(m, decode, JobShape{1, 1, past}, config);
    const double compute = static_cast<double>(cost.compute_ps());
    const double at_peak = active / aggregate_bw * kPs;
    EXPECT_GE(compute, at_peak) << "past " << past;
    // Not much more: the same bytes at the achieved bandwidth, 5 % for activations and
    // rounding, plus the fixed costs (op launches, D2D latencies).
    // The all-reduces exchange one FP32 hidden vector, the gather half a bf16 logits row.
    const double d2d_bytes = static_cast<double>(reductions - 1) * m.llm.hidden * 4 +
                             static_cast<double>(m.llm.vocab) * 2 / m.chips;
    const double fixed = static_cast<double>(ops) * dbl(config.op_overhead_ns) * 1000.0 +
                         static_cast<double>(reductions) * dbl(config.d2d_latency_ns) * 1000.0 +
                         d2d_bytes / (static_cast<double>(config.d2d_bw_mbps) * 1e6) * kPs;
    EXPECT_LE(compute, active / achieved_bw * kPs * 1.05 + fixed) << "past " << past;
    std::printf(
        "decode step after %llu tokens: active bytes %.3f GB, bound at peak %.3f ms, at %llu %% "
        "%.3f ms; modelled compute %.3f ms, job %.3f ms\n",
        static_cast<unsigned long long>(past), active / 1e9, ms(at_peak),
        static_cast<unsigned long long>(config.dram_efficiency_pct), ms(active / achieved_bw * kPs),
        ms(compute), ms(static_cast<double>(cost.total_ps())));
  }
}

// (b) On a device where only compute costs, prefill time is the FLOPs at the achieved rates.
TEST(TimingPhysics, PrefillTimeFollowsTheFlopsWhenComputeBound) {
  const DeviceConfig config = compute_only();
  const uint64_t chunk = reference().llm.prefill_chunk;
  const double base_model = static_cast<double>(prefill_compute_ps(256, config));
  const double base_flops = flops_ps(prompt_flops(256, chunk), config);
  for (const uint64_t prompt : {uint64_t{1}, uint64_t{17}, uint64_t{255}, uint64_t{256},
                                uint64_t{257}, uint64_t{1024}, uint64_t{4096}, uint64_t{16384}}) {
    const double modelled = static_cast<double>(prefill_compute_ps(prompt, config));
    const double expected = flops_ps(prompt_flops(prompt, chunk), config);
    // The head runs once per chunk; the few elementwise FLOPs left out stay under 1 %.
    EXPECT_NEAR(modelled / expected, 1.0, 0.01) << prompt << " tokens";
    EXPECT_NEAR((modelled / base_model) / (expected / base_flops), 1.0, 0.01) << prompt;
    std::printf(
        "compute-bound prefill of %5llu tokens: modelled %9.3f ms, FLOPs at %llu %% %9.3f ms\n",
        static_cast<unsigned long long>(prompt), ms(modelled),
        static_cast<unsigned long long>(config.compute_efficiency_pct), ms(expected));
  }
}

// (b) On the default device a 256-token MoE chunk reads every expert (weight-bound), so time
// grows at least with the number of chunks and at most as the FLOPs.
TEST(TimingPhysics, PrefillTimeGrowsBetweenTheChunkCountAndTheFlops) {
  const DeviceConfig config;
  const uint64_t chunk = reference().llm.prefill_chunk;
  const double base = static_cast<double>(prefill_compute_ps(256, config));
  const double base_flops = flops_ps(prompt_flops(256, chunk), config);
  for (const uint64_t prompt : {uint64_t{512}, uint64_t{4096}, uint64_t{16384}, uint64_t{40960}}) {
    const double modelled = static_cast<double>(prefill_compute_ps(prompt, config));
    const double chunks = static_cast<double>(prompt / chunk);
    const double flop_ratio = flops_ps(prompt_flops(prompt, chunk), config) / base_flops;
    EXPECT_GE(modelled / base, chunks) << prompt;
    EXPECT_LE(modelled / base, flop_ratio) << prompt;
    std::printf(
        "prefill of %5llu tokens: %9.3f ms = %6.2f x 256 tokens (chunks %4.0f, FLOPs %6.2f)\n",
        static_cast<unsigned long long>(prompt), ms(modelled), modelled / base, chunks, flop_ratio);
  }
  std::printf("prefill of   256 tokens: %9.3f ms (FLOPs alone %.3f ms)\n", ms(base),
              ms(base_flops));
}

// (b) The extra cost of a chunk's context is its extra attention FLOPs at the BF16 rate:
// attention over past positions is compute-bound (4 x heads x dim FLOPs per pair against
// K and V of 2 x kv_heads x dim bf16 per slot).
TEST(TimingPhysics, MarginalContextCostIsTheAttentionFlops) {
  const calbin::Manifest& m = reference();
  const DeviceConfig config;
  const calbin::Model& prefill = model_of(calbin::ModelType::kPrefill);
  const uint64_t chunk = m.llm.prefill_chunk;
  const uint64_t near = 4096, far = 36864;
  const TimePs t_near = job_cost(m, prefill, JobShape{chunk, chunk, near}, config).compute_ps();
  const TimePs t_far = job_cost(m, prefill, JobShape{chunk, chunk, far}, config).compute_ps();
  // Per chip: q_heads / chips heads; each of the chunk's queries sees far - near more keys.
  const Wide extra_flops =
      Wide{4} * (m.llm.q_heads / m.chips) * m.llm.head_dim * chunk * (far - near) * m.llm.layers;
  const Wide bf16_rate = Wide{config.compute_cores} * config.bf16_macs_per_cycle_per_core * 2 *
                         config.clock_mhz * 1000000 * config.compute_efficiency_pct;
  const auto expected = static_cast<double>(extra_flops * 1000000000000u * 100 / bf16_rate);
  // Each layer's op rounds up by under 1 ps.
  EXPECT_NEAR(static_cast<double>(t_far - t_near), expected, static_cast<double>(m.llm.layers + 1));
  std::printf("a 256-token chunk after %llu tokens costs %.3f ms more than after %llu\n",
              static_cast<unsigned long long>(far), ms(static_cast<double>(t_far - t_near)),
              static_cast<unsigned long long>(near));
}

// (c) Host transfers: bytes over the PCIe payload rate computed from gen and lanes, plus the
// latency, exactly.
TEST(TimingPhysics, HostTransfersAreBytesOverTheLinkPlusLatency) {
  const calbin::Manifest& m = reference();
  const calbin::Model& prefill = model_of(calbin::ModelType::kPrefill);
  const calbin::Model& decode = model_of(calbin::ModelType::kDecode);
  const uint64_t logits_row = uint64_t{m.llm.vocab} * 2;  // bf16
  ASSERT_EQ(logits_row, 303872u);
  for (const auto& [gen, lanes] : {std::pair{3, 8}, std::pair{4, 16}, std::pair{5, 4}}) {
    DeviceConfig config;
    config.pcie_gen = static_cast<uint64_t>(gen);
    config.pcie_lanes = static_cast<uint64_t>(lanes);
    // Token ids and positions, int32 each, for the chunk (prefill) or the one token (decode).
    const uint64_t prefill_in = 2 * m.llm.prefill_chunk * 4;
    const JobCost p = job_cost(m, prefill, JobShape{256, 256, 0}, config);
    EXPECT_EQ(p.h2d_bytes, prefill_in);
    EXPECT_EQ(p.h2d_ps, expected_link_ps(prefill_in, config)) << "gen " << gen << " x" << lanes;
    const JobCost d = job_cost(m, decode, JobShape{1, 1, 100}, config);
    EXPECT_EQ(d.h2d_bytes, 2 * 4u);
    EXPECT_EQ(d.h2d_ps, expected_link_ps(8, config));
    EXPECT_EQ(d.d2h_bytes, logits_row);
    EXPECT_EQ(d.d2h_ps, expected_link_ps(logits_row, config)) << "gen " << gen << " x" << lanes;
    // Configure uploads the param bytes with one latency per block.
    const uint64_t params = uint64_t{8} << 30;
    EXPECT_EQ(configure_ps(params, 3, config),
              expected_link_ps(params, config) + 2 * config.pcie_latency_ns * 1000);
    std::printf("PCIe gen %d x%-2d: decode logits row D2H %.3f us, 8 GiB configure %.3f s\n", gen,
                lanes, static_cast<double>(d.d2h_ps) / 1e6,
                static_cast<double>(configure_ps(params, 1, config)) / 1e12);
  }
}

// (d) The expert weights a submission reads: E x (1 - (1 - k/E)^T) distinct experts.
TEST(TimingPhysics, MoeReadsTheDistinctExpertsTheTokensTouch) {
  const calbin::Manifest& m = reference();
  const DeviceConfig config;
  const calbin::Model& prefill = model_of(calbin::ModelType::kPrefill);
  const calbin::Model& decode = model_of(calbin::ModelType::kDecode);
  // Chip 0's slices of layer 0's experts: all of them.
  double all_experts = 0;
  for (const auto& [role, bytes] : weight_bytes_by_role(0, 0)) {
    all_experts += is_expert_role(role) ? static_cast<double>(bytes) : 0;
  }
  ASSERT_GT(all_experts, 0);
  // Only layer 0's expert ops on chip 0, so the segment's bytes are theirs.
  const auto experts_only = [&](const calbin::Model& model) {
    calbin::Model only = model;
    only.ops = {calbin::ChipOps{0, {}}};
    for (const calbin::Op& op : model.ops.at(0).ops) {
      if (op.type == "moe_grouped_dense" && op.layer == 0) {
        only.ops[0].ops.push_back(op);
      }
    }
    EXPECT_EQ(only.ops[0].ops.size(), 3u);
    return only;
  };
  const calbin::Model prefill_experts = experts_only(prefill);
  const calbin::Model decode_experts = experts_only(decode);
  const double e = m.llm.experts, k = m.llm.active_experts;
  const double hidden = m.llm.hidden, slice = static_cast<double>(m.llm.ffn) / m.chips;
  for (const uint64_t tokens :
       {uint64_t{1}, uint64_t{2}, uint64_t{4}, uint64_t{16}, uint64_t{64}, uint64_t{256}}) {
    const double touched = e * (1 - std::pow(1 - k / e, static_cast<double>(tokens)));
    const double weights = all_experts * touched / e;
    // Each token-expert row reads its bf16 input and writes its bf16 output in gate, up, down.
    const double rows = static_cast<double>(tokens) * k;
    const double activations = rows * 3 * (hidden + slice) * 2;
    const JobCost cost = job_cost(m, prefill_experts, JobShape{tokens, 256, 0}, config);
    const double bytes = static_cast<double>(cost.segments.at(0).chips.at(0).bytes);
    EXPECT_GE(bytes, weights * (1 - 1e-9)) << tokens;
    EXPECT_LE(bytes, weights * (1 + 1e-9) + activations + 8) << tokens;
    std::printf(
        "%3llu tokens touch %7.3f of 128 experts: %.3f MB of expert weights per chip and layer\n",
        static_cast<unsigned long long>(tokens), touched, bytes / 1e6);
  }
  // One token reads exactly k/E of the weights, as a decode step does.
  const JobCost one = job_cost(m, prefill_experts, JobShape{1, 256, 0}, config);
  const JobCost step = job_cost(m, decode_experts, JobShape{1, 1, 0}, config);
  const double decode_bytes = static_cast<double>(step.segments.at(0).chips.at(0).bytes);
  EXPECT_GE(decode_bytes, all_experts * k / e);
  EXPECT_LE(decode_bytes, all_experts * k / e + k * 3 * (hidden + slice) * 2);
  EXPECT_EQ(one.segments.at(0).chips.at(0).bytes, step.segments.at(0).chips.at(0).bytes);
  // A full chunk reads (all but a 1e-7 sliver of) every expert.
  const JobCost full = job_cost(m, prefill_experts, JobShape{256, 256, 0}, config);
  EXPECT_GE(static_cast<double>(full.segments.at(0).chips.at(0).bytes), all_experts * 0.9999);
}

}  // namespace
}  // namespace simdev
