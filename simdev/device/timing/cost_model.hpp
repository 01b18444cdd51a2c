// The cycle-approximate timing model of one job, in integer picoseconds, so the same job
// always takes the same device time. A job passes three pipeline stages:
//   H2D      input bytes over PCIe: bytes / link bandwidth + link latency
//   compute  the op list, cut into barrier-delimited segments. In a segment each chip runs
//            its ops (each op: max(compute, memory) + per-op overhead); the segment ends
//            when the slowest chip is done and, for a tensor-parallel reduction, after the
//            D2D all-reduce (latency + bytes / D2D bandwidth).
//   D2H      output bytes over PCIe (a full-vocabulary BF16 logits row per decode step).
// plus a fixed per-submission overhead before H2D. The device (device_jobs.cpp) runs the
// stages as a pipeline: the link and the chips each take one job at a time, in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calbin/manifest.hpp"
#include "simdev/device/base/sim_time.hpp"
#include "simdev/device/timing/device_config.hpp"

namespace simdev {

// What one chip does in a segment.
struct ChipLoad {
  TimePs ps = 0;  // its ops and their overheads
  uint64_t flops = 0;
  uint64_t bytes = 0;  // DRAM traffic
  friend bool operator==(const ChipLoad&, const ChipLoad&) = default;
};

// One barrier-delimited part of a job's compute stage.
struct Segment {
  int32_t layer = -1;           // the layer the segment belongs to; -1 for none
  const char* label = "";       // static string: "embed", "attention", "moe", "lm_head", ...
  std::vector<ChipLoad> chips;  // one per chip of the calbin (one allocation per segment)
  TimePs d2d_ps = 0;            // the reduction after the chips finish; 0 for none
  uint64_t d2d_bytes = 0;

  TimePs chips_ps() const;  // the slowest chip
  TimePs total_ps() const { return saturating_add(chips_ps(), d2d_ps); }
};

struct JobCost {
  TimePs submit_ps = 0;
  TimePs h2d_ps = 0;
  uint64_t h2d_bytes = 0;
  std::vector<Segment> segments;
  TimePs d2h_ps = 0;
  uint64_t d2h_bytes = 0;

  TimePs compute_ps() const;  // sum of the segments
  TimePs total_ps() const;    // every stage back to back: the job alone on the device
};

struct JobShape {
  uint64_t tokens = 1;  // cur_seq_len as submitted
  uint64_t chunk = 1;   // tokens the op list describes
  uint64_t past = 0;    // past_kv_cur_seq_len: KV positions attention reads besides its own
  // Independent sequences the tokens belong to (a batch decode's live rows), each with
  // `past` positions of its own; 1 for a prefill chunk or a batch-1 decode.
  uint64_t rows = 1;
};

// Time to move bytes over a link of bandwidth_mbps (1e6 bytes/s), rounded up.
TimePs transfer_ps(uint64_t bytes, uint64_t bandwidth_mbps);

// Time to process `amount` units (ops, bytes) at `rate`, rounded up; exact integer arithmetic.
TimePs duration_ps(uint64_t amount, const Rate& rate);

// One op exactly as listed (a full chunk): max(flops / achieved peak of its dtype, bytes /
// achieved DRAM bandwidth) + op overhead. INT8 and INT4 ops run at the INT8 peak, every
// other dtype at the BF16 peak.
TimePs op_ps(const calbin::Op& op, const DeviceConfig& config);

// The expected number of distinct experts that `tokens` tokens touch when each picks
// `active` of `experts` uniformly: experts x (1 - (1 - active / experts)^tokens), in units of
// 1 / kExpertUnit expert. Integer fixed point, so every platform gets the same value.
inline constexpr uint64_t kExpertUnit = uint64_t{1} << 32;
uint64_t expected_experts_fixed(uint64_t experts, uint64_t active, uint64_t tokens);

JobCost job_cost(const calbin::Manifest& manifest, const calbin::Model& model,
                 const JobShape& shape, const DeviceConfig& config);

// What the timing model reads of one op.
struct OpFigures {
  calbin::Dtype dtype = calbin::Dtype::kBf16;
  uint32_t experts = 0;
  uint64_t flops = 0;
  uint64_t bytes = 0;
  uint64_t weight_bytes = 0;
  uint64_t kv_bytes = 0;
  uint64_t kv_slots = 0;
};

// job_cost() for many jobs of one model: the op lists are cut into segments and each op's
// figures copied out once, when the calbin is loaded, and per (tokens, chunk) the plan keeps
// the sums of the ops that do not read the KV cache, so a decode step recomputes only its
// attention ops. cost() equals job_cost() exactly: the sums are saturating additions of
// unsigned terms, whose result does not depend on their order (tested). It holds no pointer
// into the manifest. Not thread-safe: the device runs one call at a time.
class CostPlan {
 public:
  CostPlan(const calbin::Manifest& manifest, const calbin::Model& model,
           const DeviceConfig& config);
  JobCost cost(const JobShape& shape);

 private:
  struct ChipRun {
    uint32_t chip = 0;
    size_t begin = 0;  // ops_[begin, kv_begin) do not read the KV cache, [kv_begin, end) do
    size_t kv_begin = 0;
    size_t end = 0;
  };
  struct PlannedSegment {
    int32_t layer = -1;
    const char* label = "";
    bool scaled = true;          // false for the head: it runs on the last token only
    bool reduces = false;        // a D2D reduction closes the segment
    bool gather = false;         // ... and it is a gather, not an all-reduce
    uint64_t reduced_bytes = 0;  // the reduction's tensor, as listed
    std::vector<ChipRun> runs;
  };
  // The segments costed with only the ops that do not read the KV cache.
  struct Memo {
    uint64_t tokens = 0;
    uint64_t chunk = 0;
    std::vector<Segment> segments;
  };
  static constexpr size_t kMemos = 4;  // decode, a full prefill chunk, a last partial chunk, ...

  const std::vector<Segment>& kv_independent(const JobShape& shape);

  DeviceConfig config_;
  uint32_t chips_ = 1;
  uint64_t experts_ = 0;
  uint64_t active_experts_ = 0;
  uint64_t h2d_bytes_ = 0;
  uint64_t d2h_bytes_ = 0;
  std::vector<OpFigures> ops_;
  std::vector<PlannedSegment> segments_;
  std::vector<Memo> memos_;
  size_t next_memo_ = 0;  // the one replaced next once kMemos are kept
};

// Uploading the param blocks at configure: bytes over PCIe plus one latency per block.
TimePs configure_ps(uint64_t param_bytes, uint64_t block_count, const DeviceConfig& config);

// Where a job's compute stands: segment `index` starts this long after the compute starts.
TimePs segment_start_ps(const std::vector<Segment>& segments, size_t index);
// The segment in progress `offset_ps` after the compute started; segments.size() once every
// segment is done.
size_t segment_at(const std::vector<Segment>& segments, TimePs offset_ps);

// Injected slowness (FAULTS.md). slow_completion: every part of the compute, chips and D2D,
// takes `factor` times longer. Thermal throttling: a throttled chip's ops take `factor`
// times longer in every segment that starts before `until_ps` (the throttle is checked at
// segment boundaries, where the firmware reprograms the clocks); the D2D link is not slowed.
void slow_down(std::vector<Segment>& segments, uint64_t factor);
struct ChipThrottle {
  uint64_t factor = 1;
  TimePs until_ps = 0;
};
void throttle(std::vector<Segment>& segments, TimePs start_ps,
              const std::vector<ChipThrottle>& chips);

}  // namespace simdev
