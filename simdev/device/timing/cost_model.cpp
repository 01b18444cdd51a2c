// The timing model (simdev/device/README.md, "Timing"). How a job differs from the op list:
// the op list describes one full chunk (prefill: `chunk` tokens attending causally within
// the chunk; decode: one token reading `kv_slots` KV slots); a job carries `tokens` tokens
// after `past` KV positions. Each op's figures are rescaled part by part:
//   flops         x tokens / chunk; attention: x its (query, key) pairs / the listed pairs
//   weight_bytes  unchanged (weights are read once per submission); MoE expert weights:
//                 x expected distinct experts / the experts the op lists
//   kv_bytes      x (past + tokens) / kv_slots
//   a batch decode of `rows` sequences: attention pairs and KV bytes x rows, each row one
//                 token after `past` of its own (the op list lists a batch of rows reading
//                 kv_slots positions each, as a chunk of that many tokens would)
//   other bytes   x tokens / chunk (activations)
// except the head (the ops after the last layer), which runs on the last token only and costs
// the same for any submission.
#include "simdev/device/timing/cost_model.hpp"

#include <algorithm>
#include <limits>

namespace simdev {
namespace {

__extension__ typedef unsigned __int128 Wide;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr TimePs kPsPerSecond = 1000000000000;

uint64_t clamp_u64(Wide value) {
  return value > Wide{kU64Max} ? kU64Max : static_cast<uint64_t>(value);
}

TimePs div_up_saturating(Wide numerator, Wide denominator) {
  const Wide value = numerator / denominator + (numerator % denominator != 0 ? 1 : 0);
  return value > Wide{kTimeNever} ? kTimeNever : static_cast<TimePs>(value);
}

// value x num / den, rounded up and saturated; den 0 leaves the value as it is.
uint64_t scale_up(uint64_t value, uint64_t num, uint64_t den) {
  if (den == 0) {
    return value;
  }
  return clamp_u64(Wide{value} * num / den + (Wide{value} * num % den != 0 ? 1 : 0));
}

uint64_t tensor_bytes_sum(const std::vector<calbin::TensorDesc>& tensors) {
  uint64_t sum = 0;
  for (const auto& tensor : tensors) {
    sum = sum > kU64Max - tensor.bytes ? kU64Max : sum + tensor.bytes;
  }
  return sum;
}

bool is_int8_class(calbin::Dtype dtype) {
  return dtype == calbin::Dtype::kInt8 || dtype == calbin::Dtype::kInt4;
}

Rate achieved_compute(calbin::Dtype dtype, const DeviceConfig& config) {
  const Rate peak =
      is_int8_class(dtype) ? config.peak_int8_ops_per_s() : config.peak_bf16_ops_per_s();
  return peak.at_pct(config.compute_efficiency_pct);
}

TimePs op_time(calbin::Dtype dtype, uint64_t flops, uint64_t bytes, const DeviceConfig& config) {
  const TimePs math = duration_ps(flops, achieved_compute(dtype, config));
  const TimePs memory =
      duration_ps(bytes, config.dram_bytes_per_s().at_pct(config.dram_efficiency_pct));
  return saturating_add(std::max(math, memory), ns_to_ps(config.op_overhead_ns));
}

// The reductions between chips: the op list marks them with d2d_* ops.
bool is_barrier(const calbin::Op& op) { return op.type.rfind("d2d_", 0) == 0; }

// Causal (query, key) pairs per head when `tokens` queries follow `past` cached positions.
uint64_t attention_pairs(uint64_t tokens, uint64_t past) {
  return clamp_u64(Wide{tokens} * past + Wide{tokens} * (Wide{tokens} + 1) / 2);
}

// What the job does differently from the listed chunk.
struct Scaling {
  bool scaled = true;  // false for the head: it runs on the last token whatever was submitted
  uint64_t tokens = 1;
  uint64_t chunk = 1;
  uint64_t past = 0;
  uint64_t rows = 1;          // independent sequences, each `tokens / rows` tokens after `past`
  uint64_t experts = 0;       // llm.experts
  uint64_t expert_fixed = 0;  // expected distinct experts, in 1 / kExpertUnit
};

struct ScaledOp {
  uint64_t flops = 0;
  uint64_t bytes = 0;
};

ScaledOp scale_op(const OpFigures& op, const Scaling& s) {
  if (!s.scaled) {
    return {op.flops, op.bytes};
  }
  const uint64_t weights = std::min(op.weight_bytes, op.bytes);
  const bool attention = op.kv_slots > 0;
  const uint64_t kv = attention ? std::min(op.kv_bytes, op.bytes - weights) : 0;
  const uint64_t activations = op.bytes - weights - kv;
  ScaledOp out;
  if (attention) {
    // The listed op covers `chunk` queries whose last one sees kv_slots positions.
    const uint64_t listed_past = op.kv_slots > s.chunk ? op.kv_slots - s.chunk : 0;
    out.flops =
        scale_up(op.flops, clamp_u64(Wide{s.rows} * attention_pairs(s.tokens / s.rows, s.past)),
                 attention_pairs(s.chunk, listed_past));
  } else {
    out.flops = scale_up(op.flops, s.tokens, s.chunk);
  }
  uint64_t weight_read = weights;
  if (op.experts > 0 && s.experts > 0) {
    weight_read =
        clamp_u64(Wide{weights} * s.expert_fixed / (Wide{op.experts} * kExpertUnit) +
                  (Wide{weights} * s.expert_fixed % (Wide{op.experts} * kExpertUnit) != 0 ? 1 : 0));
  }
  const uint64_t kv_read =
      attention ? scale_up(kv, clamp_u64(Wide{s.rows} * s.past + s.tokens), op.kv_slots) : 0;
  const Wide bytes = Wide{weight_read} + kv_read + scale_up(activations, s.tokens, s.chunk);
  out.bytes = clamp_u64(bytes);
  return out;
}

// Which part of the graph a run of ops belongs to.
enum class Part { kEmbed, kLayer, kHead, kFlat };

struct Piece {
  size_t begin = 0;
  size_t end = 0;  // one past the last op; the last op may be a barrier
  Part part = Part::kFlat;
};

// Cuts one chip's op list after every barrier and wherever the layer changes, so that the
// embedding, each layer's attention and MLP/MoE, and the head are pieces of their own.
std::vector<Piece> split(const std::vector<calbin::Op>& ops) {
  const bool layered =
      std::any_of(ops.begin(), ops.end(), [](const calbin::Op& op) { return op.layer >= 0; });
  std::vector<Piece> pieces;
  bool seen_layer = false;
  size_t begin = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const bool last = i + 1 == ops.size();
    if (!last && !is_barrier(ops[i]) && ops[i + 1].layer == ops[i].layer) {
      continue;
    }
    Part part = Part::kFlat;
    if (ops[begin].layer >= 0) {
      part = Part::kLayer;
      seen_layer = true;
    } else if (layered) {
      part = seen_layer ? Part::kHead : Part::kEmbed;
    }
    pieces.push_back(Piece{begin, i + 1, part});
    begin = i + 1;
  }
  return pieces;
}

const char* label_of(const std::vector<calbin::Op>& ops, const Piece& piece) {
  switch (piece.part) {
    case Part::kEmbed:
      return "embed";
    case Part::kHead:
      return "lm_head";
    case Part::kFlat:
      return "ops";
    case Part::kLayer:
      break;
  }
  bool attention = false;
  bool moe = false;
  for (size_t i = piece.begin; i < piece.end; ++i) {
    attention = attention || ops[i].type == "flash_attention";
    moe = moe || ops[i].type.rfind("moe_", 0) == 0;
  }
  if (attention && moe) {
    return "layer";
  }
  return attention ? "attention" : (moe ? "moe" : "mlp");
}

uint64_t element_bytes(const calbin::Op& op) {
  Wide elements = 1;
  for (const int64_t dim : op.shape) {
    elements = std::min(elements * static_cast<uint64_t>(std::max<int64_t>(dim, 0)), Wide{kU64Max});
  }
  return clamp_u64((elements * calbin::dtype_bits(op.dtype) + 7) / 8);
}

OpFigures figures_of(const calbin::Op& op) {
  return OpFigures{op.dtype,        op.experts,  op.flops,   op.bytes,
                   op.weight_bytes, op.kv_bytes, op.kv_slots};
}

Scaling scaling_for(const JobShape& shape, uint64_t experts, uint64_t active_experts) {
  Scaling s;
  s.tokens = shape.tokens;
  s.chunk = std::max<uint64_t>(shape.chunk, 1);
  s.past = shape.past;
  s.rows = std::clamp<uint64_t>(shape.rows, 1, std::max<uint64_t>(shape.tokens, 1));
  s.experts = experts;
  s.expert_fixed = expected_experts_fixed(experts, active_experts, shape.tokens);
  return s;
}

// Adds ops [begin, end) to one chip's share of a segment.
void add_ops(const std::vector<OpFigures>& ops, size_t begin, size_t end, const Scaling& s,
             const DeviceConfig& config, uint32_t chip, Segment& segment) {
  TimePs& ps = segment.chips[chip].ps;
  uint64_t& flops = segment.chips[chip].flops;
  uint64_t& bytes = segment.chips[chip].bytes;
  for (size_t i = begin; i < end; ++i) {
    const ScaledOp scaled = scale_op(ops[i], s);
    ps = saturating_add(ps, op_time(ops[i].dtype, scaled.flops, scaled.bytes, config));
    flops = saturating_add(flops, scaled.flops);
    bytes = saturating_add(bytes, scaled.bytes);
  }
}

}  // namespace

CostPlan::CostPlan(const calbin::Manifest& manifest, const calbin::Model& model,
                   const DeviceConfig& config)
    : config_(config),
      chips_(std::max<uint32_t>(manifest.chips, 1)),
      experts_(manifest.llm.experts),
      active_experts_(manifest.llm.active_experts),
      h2d_bytes_(tensor_bytes_sum(model.inputs)),
      d2h_bytes_(tensor_bytes_sum(model.outputs)) {
  for (const calbin::ChipOps& chip_ops : model.ops) {
    // An op list for a chip the calbin does not have cannot run; calrt check reports it.
    if (chip_ops.chip >= chips_ || chip_ops.ops.empty()) {
      continue;
    }
    const std::vector<calbin::Op>& ops = chip_ops.ops;
    const std::vector<Piece> pieces = split(ops);
    if (segments_.size() < pieces.size()) {
      segments_.resize(pieces.size());
    }
    for (size_t k = 0; k < pieces.size(); ++k) {
      const Piece& piece = pieces[k];
      PlannedSegment& segment = segments_[k];
      const bool scaled = piece.part != Part::kHead;
      if (segment.runs.empty()) {
        // The first chip with this piece names the segment and its reduction; tensor-parallel
        // chips run the same graph, so the others agree.
        segment.layer = ops[piece.begin].layer;
        segment.label = label_of(ops, piece);
        segment.scaled = scaled;
        const calbin::Op& last = ops[piece.end - 1];
        segment.reduces = chips_ >= 2 && is_barrier(last);
        segment.gather = last.type == "d2d_gather";
        segment.reduced_bytes = element_bytes(last);
      }
      // The ops that read the KV cache go last, so a job can take the others' sums as kept.
      ChipRun run{chip_ops.chip, ops_.size(), 0, 0};
      for (size_t i = piece.begin; i < piece.end; ++i) {
        if (!scaled || ops[i].kv_slots == 0) {
          ops_.push_back(figures_of(ops[i]));
        }
      }
      run.kv_begin = ops_.size();
      for (size_t i = piece.begin; i < piece.end; ++i) {
        if (scaled && ops[i].kv_slots > 0) {
          ops_.push_back(figures_of(ops[i]));
        }
      }
      run.end = ops_.size();
      segment.runs.push_back(run);
    }
  }
}

const std::vector<Segment>& CostPlan::kv_independent(const JobShape& shape) {
  const uint64_t chunk = std::max<uint64_t>(shape.chunk, 1);
  for (const Memo& memo : memos_) {
    if (memo.tokens == shape.tokens && memo.chunk == chunk) {
      return memo.segments;
    }
  }
  Memo* memo = nullptr;
  if (memos_.size() < kMemos) {
    memo = &memos_.emplace_back();
  } else {
    memo = &memos_[next_memo_];
    next_memo_ = (next_memo_ + 1) % kMemos;
  }
  memo->tokens = shape.tokens;
  memo->chunk = chunk;
  const Scaling scaling = scaling_for(shape, experts_, active_experts_);
  memo->segments.assign(segments_.size(), Segment{});
  for (size_t k = 0; k < segments_.size(); ++k) {
    const PlannedSegment& planned = segments_[k];
    Segment& segment = memo->segments[k];
    segment.layer = planned.layer;
    segment.label = planned.label;
    segment.chips.assign(chips_, ChipLoad{});
    Scaling s = scaling;
    s.scaled = planned.scaled;
    for (const ChipRun& run : planned.runs) {
      add_ops(ops_, run.begin, run.kv_begin, s, config_, run.chip, segment);
    }
    if (planned.reduces) {
      // The reduction that closes the segment: one latency plus the bytes one chip receives.
      // An all-reduce exchanges partial sums (each chip receives every other chip's, in the
      // op's dtype: FP32 in the generated calbins); a gather brings the other chips' slices
      // of the op's tensor to chip 0.
      const uint64_t payload =
          s.scaled ? scale_up(planned.reduced_bytes, s.tokens, s.chunk) : planned.reduced_bytes;
      segment.d2d_bytes = planned.gather ? scale_up(payload, chips_ - 1, chips_)
                                         : clamp_u64(Wide{payload} * (chips_ - 1));
      segment.d2d_ps = saturating_add(ns_to_ps(config_.d2d_latency_ns),
                                      duration_ps(segment.d2d_bytes, config_.d2d_bytes_per_s()));
    }
  }
  return memo->segments;
}

JobCost CostPlan::cost(const JobShape& shape) {
  JobCost cost;
  const TimePs link_latency = ns_to_ps(config_.pcie_latency_ns);
  const Rate pcie = config_.pcie_bytes_per_s();
  cost.submit_ps = ns_to_ps(config_.submit_overhead_ns);
  cost.h2d_bytes = h2d_bytes_;
  cost.h2d_ps = saturating_add(duration_ps(cost.h2d_bytes, pcie), link_latency);
  cost.d2h_bytes = d2h_bytes_;
  cost.d2h_ps = saturating_add(duration_ps(cost.d2h_bytes, pcie), link_latency);
  cost.segments = kv_independent(shape);
  const Scaling scaling = scaling_for(shape, experts_, active_experts_);
  for (size_t k = 0; k < segments_.size(); ++k) {
    for (const ChipRun& run : segments_[k].runs) {
      add_ops(ops_, run.kv_begin, run.end, scaling, config_, run.chip, cost.segments[k]);
    }
  }
  return cost;
}

TimePs Segment::chips_ps() const {
  TimePs slowest = 0;
  for (const ChipLoad& chip : chips) {
    slowest = std::max(slowest, chip.ps);
  }
  return slowest;
}

TimePs JobCost::compute_ps() const {
  TimePs sum = 0;
  for (const Segment& segment : segments) {
    sum = saturating_add(sum, segment.total_ps());
  }
  return sum;
}

TimePs JobCost::total_ps() const {
  return saturating_add(saturating_add(saturating_add(submit_ps, h2d_ps), compute_ps()), d2h_ps);
}

TimePs transfer_ps(uint64_t bytes, uint64_t bandwidth_mbps) {
  // bytes / (mbps * 1e6 B/s) in ps = bytes * 1e6 / mbps.
  return div_up_saturating(Wide{bytes} * 1000000u, std::max<uint64_t>(bandwidth_mbps, 1));
}

TimePs duration_ps(uint64_t amount, const Rate& rate) {
  if (amount == 0) {
    return 0;
  }
  if (rate.num == 0) {
    return kTimeNever;
  }
  // amount / (num / den per s) in ps = amount * 1e12 * den / num. amount * 1e12 < 2^104, so
  // the product fits whenever den < 2^24 (the config's rates have den <= 104000).
  const Wide scaled = Wide{amount} * kPsPerSecond;
  if (rate.den >= (uint64_t{1} << 24) && scaled > ~Wide{0} / rate.den) {
    return kTimeNever;
  }
  return div_up_saturating(scaled * rate.den, rate.num);
}

TimePs op_ps(const calbin::Op& op, const DeviceConfig& config) {
  return op_time(op.dtype, op.flops, op.bytes, config);
}

uint64_t expected_experts_fixed(uint64_t experts, uint64_t active, uint64_t tokens) {
  if (experts == 0 || tokens == 0 || active == 0) {
    return 0;
  }
  if (active >= experts) {
    return experts * kExpertUnit;
  }
  // (1 - active / experts)^tokens by squaring, in 2^-62 fixed point (rounded down at each
  // step: the error stays below tokens x 2^-62, far under the 2^-32 of the result).
  constexpr int kBits = 62;
  const Wide one = Wide{1} << kBits;
  Wide base = (Wide{experts - active} << kBits) / experts;
  Wide miss = one;
  for (uint64_t t = tokens; t != 0; t >>= 1) {
    if ((t & 1) != 0) {
      miss = (miss * base) >> kBits;
    }
    base = (base * base) >> kBits;
  }
  // The touched fraction in 2^-32 units, rounded to nearest, times the expert count.
  const Wide touched = ((one - miss) + (Wide{1} << (kBits - 33))) >> (kBits - 32);
  return clamp_u64(touched * experts);
}

JobCost job_cost(const calbin::Manifest& manifest, const calbin::Model& model,
                 const JobShape& shape, const DeviceConfig& config) {
  return CostPlan(manifest, model, config).cost(shape);
}

TimePs configure_ps(uint64_t param_bytes, uint64_t block_count, const DeviceConfig& config) {
  const TimePs latency = ns_to_ps(config.pcie_latency_ns);
  return saturating_add(duration_ps(param_bytes, config.pcie_bytes_per_s()),
                        saturating_mul(latency, std::max<uint64_t>(block_count, 1)));
}

TimePs segment_start_ps(const std::vector<Segment>& segments, size_t index) {
  TimePs start = 0;
  for (size_t k = 0; k < index && k < segments.size(); ++k) {
    start = saturating_add(start, segments[k].total_ps());
  }
  return start;
}

size_t segment_at(const std::vector<Segment>& segments, TimePs offset_ps) {
  TimePs end = 0;
  for (size_t k = 0; k < segments.size(); ++k) {
    end = saturating_add(end, segments[k].total_ps());
    if (offset_ps < end) {
      return k;
    }
  }
  return segments.size();
}

void slow_down(std::vector<Segment>& segments, uint64_t factor) {
  for (Segment& segment : segments) {
    for (ChipLoad& chip : segment.chips) {
      chip.ps = saturating_mul(chip.ps, factor);
    }
    segment.d2d_ps = saturating_mul(segment.d2d_ps, factor);
  }
}

void throttle(std::vector<Segment>& segments, TimePs start_ps,
              const std::vector<ChipThrottle>& chips) {
  TimePs at = start_ps;
  for (Segment& segment : segments) {
    for (size_t chip = 0; chip < segment.chips.size() && chip < chips.size(); ++chip) {
      if (at < chips[chip].until_ps) {
        segment.chips[chip].ps = saturating_mul(segment.chips[chip].ps, chips[chip].factor);
      }
    }
    at = saturating_add(at, segment.total_ps());
  }
}

}  // namespace simdev
