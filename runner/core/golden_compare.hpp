// One device logits row against a golden case (the smoke's and the scenarios' numeric
// check): the prefill row against the golden prefill logits, a teacher-forced decode row
// against the golden decode step, and the thresholds it falls short of.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "calbin/golden.hpp"
#include "calbin/manifest.hpp"
#include "runner/core/decode_row.hpp"
#include "runner/core/metrics.hpp"
#include "runner/core/session_options.hpp"

namespace runner {

struct Comparison {
  double cosine = 0.0;
  double max_abs_error = 0.0;
  double top_k_overlap = 0.0;
  double gain = 1.0;     // least-squares scale of device over golden logits
  double rel_rms = 0.0;  // ||device - golden|| / ||golden||
  int32_t argmax = -1;
  int32_t expected_argmax = -1;
  // The golden's top-1 minus top-2 logit: how decisive the golden greedy token is.
  double golden_margin = 0.0;
};

// One device row against the device-contract reference's row at the same token. The unit is
// the BF16 ULP at the row's largest |contract logit| (2^(floor(log2 max) - 7)), so an error
// reads the same whatever the logits' scale. A correct device is at 0 (calbin/MODEL.md).
struct ContractComparison {
  double ulps = 0.0;       // max |device - contract| / unit over the row
  double mean_ulps = 0.0;  // mean |device - contract| / unit over the row
  uint32_t differing = 0;  // logits not equal to the contract's
  int32_t worst_id = -1;
  float device = 0.0f;  // at worst_id
  float contract = 0.0f;
  // A ranked row: worst_id is a token the contract ranks above the device's last candidate
  // by more than `ulps`, and the device left it out.
  bool missing = false;

  // "logit 7: device 1.5 vs contract 1.25", or what is missing from a ranked row.
  std::string worst() const;
};

// Every contract row of a run folded together.
struct ContractSummary {
  uint64_t rows = 0;
  uint64_t logits = 0;
  uint64_t differing = 0;
  double max_ulps = 0.0;
  double ulps_sum = 0.0;  // of the rows' mean_ulps

  double mean_ulps() const { return rows == 0 ? 0.0 : ulps_sum / static_cast<double>(rows); }
  void add(const ContractComparison& c, size_t row_size);
  void merge(const ContractSummary& other);
};

ContractComparison compare_contract(std::span<const float> logits, std::span<const float> row);
// Either kind of decode row against the contract row. A ranked row is judged on its K
// values at their ids and on what it leaves out: a token the contract ranks above the
// device's last candidate (or above the contract's value there, if lower) counts by how far
// above it is, so near-ties at the K-th place within the gate may trade places.
ContractComparison compare_contract(const DecodeRow& row, std::span<const float> contract);
// The position, among the golden case's contract rows, of the row for the token of 0-based
// sequence index `index`; nullopt when the golden set has none there (a set without a
// contract reference has none at all).
std::optional<size_t> contract_row_at(const calbin::GoldenCase& golden, uint64_t index);
// That row's `width` logits; nullopt when there is none or the rows are too short for it.
std::optional<std::span<const float>> contract_row(const calbin::GoldenCase& golden, uint64_t index,
                                                   size_t width);

// Layer probes (CALRT_EXT_PROBE) against the contract reference's: the relative error
// ||device - contract|| / ||contract|| at each point, and the first point where any row
// differs. A correct device equals the contract at every point (calbin/MODEL.md), so the
// first difference is the layer where the defect enters, at any depth (runner/README.md,
// "First divergent layer").
double relative_error(std::span<const float> device, std::span<const float> contract);
std::optional<size_t> first_divergent_point(const std::vector<double>& mean_errors);
// "embedding", "layer 0 attention", "layer 0 MLP", ... (abi/calrt_ext.h, CALRT_EXT_PROBE).
std::string probe_point_name(size_t point);

// Per-point sums of the relative errors over the rows that had probes on both sides.
struct ProbeSummary {
  std::vector<double> error_sums;
  uint64_t rows = 0;
  std::string unavailable;  // why there are none, when rows == 0

  void add(const std::vector<double>& errors);
  void merge(const ProbeSummary& other);
  std::vector<double> mean_errors() const;
  // One sentence: the first point that differs, or that every layer equals the contract and
  // what that means given whether the logits rows (`logits_differ`) did.
  std::string describe(bool logits_differ) const;
};

// The logits of the prompt's last position against golden.prefill_logits.
Comparison compare_prefill(std::span<const float> logits, const calbin::GoldenCase& golden,
                           size_t top_k);
// The logits of teacher-forced decode step `step` against its golden row (full logits when
// stored, else the golden top-k values at their ids).
Comparison compare_decode(std::span<const float> logits, const calbin::GoldenCase& golden,
                          uint32_t step, size_t top_k);
// Either kind of decode row. A ranked row is compared on the ids it gave: greedy is its first
// id, the top-k overlap is the share of its best min(K, top_k) ids among the golden's top_k
// (a full row's overlap when K >= top_k), and cosine, gain, relative RMS and max abs
// error are over its candidates against the golden values at the same ids (the golden's full
// row when stored, else the ids both top lists hold).
Comparison compare_decode(const DecodeRow& row, const calbin::GoldenCase& golden, uint32_t step,
                          size_t top_k);
// The contract reference's row of `index` compared as `row` is: ranked like the device when
// `row` is ranked. nullopt when the golden set has no contract row there.
std::optional<Comparison> compare_contract_decode(const DecodeRow& row,
                                                  const calbin::GoldenCase& golden, uint64_t index,
                                                  uint32_t step, size_t vocab, size_t top_k);

// How far logits are from the FP32 golden in the FP32 gates' own terms: one row's comparison,
// or a run's aggregates.
struct Fp32Distance {
  double cosine = 1.0;         // the smallest
  double max_abs_error = 0.0;  // the largest
  double top_k_overlap = 1.0;  // the smallest
  double gain_bias = 0.0;      // |mean gain - 1|
  double rel_rms = 0.0;        // the mean
  double greedy = 1.0;         // agreement rate over decisive rows

  static Fp32Distance of(const Comparison& c);
  static Fp32Distance of(const MetricSummary& m);
};

// The FP32 gates at the shape being run (runner/README.md, "FP32 gates at any shape"). The
// defaults are calibrated on the presets' shapes, but how far correct W8A8 logits sit from
// FP32 depends on the shape: depth, vocabulary, activation range. The contract reference
// (the golden's rows, or computed from the calbin) is the calbin's declared numerics computed
// without the device, and a correct device equals it, so its distance from FP32 is the floor
// a correct device sits on. Each gate opens to that distance with a margin, never
// tighter than the gate's own threshold, and never past a ceiling: beyond it the declared
// numerics themselves lose too much, and the run fails saying so.
Thresholds scaled_by_reference(const Thresholds& t, const Fp32Distance& reference);

// One gate's opening, in its "larger is worse" form (1 - cosine, 1 - overlap, ...): a
// reference's distance times `scale` plus `slack`; scaled_by_reference keeps it between the
// gate's own threshold and the ceiling. Calibrated in runner/README.md, "FP32 gates at any
// shape"; a baseline (baseline.hpp) uses the same openings without floor or ceiling.
struct Opening {
  double scale;
  double slack;
  double ceiling;
};
struct Fp32Openings {
  Opening rel_rms, max_abs, cosine, top_k, gain_bias, greedy;
};
Fp32Openings fp32_openings();

// One row judged against the thresholds: a sentence per gate the row misses, and apart from
// them the greedy disagreement, which the smoke and the scenarios judge as a rate over all
// rows (a near-tie flips under W8A8 noise), never as the failure of one row. With the
// contract reference's own comparison of the row and Thresholds::scale_fp32_gates, the FP32
// gates open to the reference's distance, and each sentence says where the reference is.
struct RowJudgement {
  std::vector<std::string> failures;
  std::optional<std::string> greedy_mismatch;
  // Every sentence, the greedy one last: what a diagnosis shows.
  std::vector<std::string> all() const;
};
RowJudgement judge_row(const Comparison& c, const Thresholds& t,
                       const std::optional<Comparison>& reference = std::nullopt);

// KV positions one sequence of `golden` needs: its prompt and decode steps (at least one
// step, so a prompt-only case still has room to be continued), within the calbin's context.
uint32_t kv_tokens_for(const calbin::GoldenCase& golden, uint32_t context);

}  // namespace runner
