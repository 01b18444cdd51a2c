// One golden case of the smoke (steps 5-7): allocate and apply a KV, chunked prefill,
// teacher-forced decode, Kv_Clear and a second prefill that must reproduce the first bit
// for bit, free-running greedy decode, free the KV.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calbin/golden.hpp"
#include "runner/core/golden_compare.hpp"
#include "runner/core/metrics.hpp"
#include "runner/core/session.hpp"
#include "runner/smoke/diagnosis.hpp"

namespace runner {

// The smoke steps a case contributes to.
enum class CasePhase { inputs = 0, prefill = 1, decode = 2 };
inline constexpr size_t kCasePhases = 3;

struct CaseResult {
  std::string name;
  uint32_t prompt_len = 0;
  uint32_t decode_steps = 0;
  MetricSummary prefill;  // the first prefill against golden
  MetricSummary decode;   // teacher-forced decode against golden
  // The contract reference's rows at the same tokens against golden: how far the declared
  // numerics themselves are from FP32 (empty for a golden set without contract rows).
  MetricSummary reference_prefill;
  MetricSummary reference_decode;
  ContractSummary contract;  // prefill chunks and teacher-forced decode against the contract
  bool determinism_checked = false;  // the case got as far as its second prefill
  bool deterministic = false;        // the second prefill reproduced the first bit for bit
  uint32_t free_agreed = 0;          // agreed prefix of the free-running greedy sequence
  uint32_t free_total = 0;           // tokens it could have agreed on (decode_steps + 1)
  uint32_t submissions = 0;
  std::array<std::vector<std::string>, kCasePhases> failures;
  // The diagnosis of the first submission of each phase whose comparison fell short of a
  // threshold (or disagreed with the greedy token); shown only if the step fails.
  std::array<std::vector<std::string>, kCasePhases> diagnosis;
  std::array<double, kCasePhases> wall_ms{};
  double device_ms = 0.0;   // job end - start on the device clock, summed
  double readout_ms = 0.0;  // D2H map plus layout and BF16->FP32 conversion, summed
  // Every comparison with golden, in order: the data the gates are calibrated on
  // (runner/README.md, "Calibration of the numeric gates").
  nlohmann::json comparisons = nlohmann::json::array();
  ProbeSummary probes;  // layer probes against the contract's, over the contract rows

  nlohmann::json to_json() const;
};

// Runs one case. Never throws: a runtime error fails the phase it happened in.
CaseResult run_golden_case(Session& session, const calbin::GoldenCase& golden);

}  // namespace runner
