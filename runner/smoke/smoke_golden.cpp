// Smoke steps 5-7 over the selected golden cases: each case contributes to step 5 (inputs
// and CSRs), 6 (prefill against golden, determinism) and 7 (decode against golden); the
// metrics are judged against their thresholds over all cases.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <cmath>

#include "runner/core/report/progress.hpp"
#include "runner/core/session.hpp"
#include "runner/smoke/golden_case.hpp"

namespace runner {
namespace {

struct GoldenTotals {
  MetricSummary prefill;
  MetricSummary decode;
  MetricSummary reference_prefill;
  MetricSummary reference_decode;
  ContractSummary contract;
  ProbeSummary probes;
  uint64_t deterministic = 0;
  uint64_t determinism_checked = 0;
  uint64_t decode_steps_expected = 0;          // the cases' teacher-forced decode steps
  std::vector<std::string> decode_unfinished;  // cases whose decode stopped short
  uint64_t free_agreed = 0;
  uint64_t free_total = 0;
  uint64_t submissions = 0;
  double device_ms = 0.0;
  double readout_ms = 0.0;
};

// The FP32 gates for a phase (or the whole run): opened to the contract reference's own
// distance from FP32 over the same rows when the golden set has one.
Thresholds fp32_gates(const Thresholds& t, const MetricSummary& reference) {
  if (!t.scale_fp32_gates || reference.compared == 0) return t;
  return scaled_by_reference(t, Fp32Distance::of(reference));
}

MetricSummary merged(MetricSummary a, const MetricSummary& b) {
  a.merge(b);
  return a;
}

nlohmann::json gate(double value, double threshold, bool higher_is_better, bool gated = true) {
  const bool pass = !gated || (higher_is_better ? value >= threshold : value <= threshold);
  nlohmann::json doc = {{"value", value}, {"pass", pass}};
  if (gated) {
    doc["threshold"] = threshold;
  }
  return doc;
}

// Where the contract reference itself stands on a failed FP32 gate: next to the device's
// value it tells a device defect (reference well inside) from numerics that lose too much at
// this shape (reference at the ceiling too).
std::string reference_note(double value, const MetricSummary& reference) {
  if (reference.compared == 0) return {};
  return fmt::format(" (the contract reference: {:.6g})", value);
}

// Adds a failure to `step` for each aggregate metric of `m` outside its threshold.
void judge_metrics(const char* phase, const MetricSummary& m, const MetricSummary& reference,
                   const Thresholds& defaults, StepResult& step) {
  if (m.compared == 0) {
    return;
  }
  const Thresholds t = fp32_gates(defaults, reference);
  const bool gated = t.distribution_gated;
  if (gated && !(m.cosine_min >= t.min_cosine)) {
    step.fail(fmt::format("{} logits cosine min {:.6f} < {:.6g}{}", phase, m.cosine_min,
                          t.min_cosine, reference_note(reference.cosine_min, reference)));
  }
  if (gated && !(m.max_abs_error_max <= t.max_abs_error)) {
    step.fail(fmt::format("{} max abs error {:.5f} > {:.5g}{}", phase, m.max_abs_error_max,
                          t.max_abs_error, reference_note(reference.max_abs_error_max, reference)));
  }
  if (!(m.top_k_overlap_min >= t.min_top_k_overlap)) {
    step.fail(fmt::format("{} top-k overlap min {:.3f} < {:.3g}{}", phase, m.top_k_overlap_min,
                          t.min_top_k_overlap,
                          reference_note(reference.top_k_overlap_min, reference)));
  }
  if (gated && !(m.mean_rel_rms() <= t.max_mean_rel_rms)) {
    step.fail(fmt::format(
        "{} mean relative RMS error {:.5f} > {:.5g}{} (a systematic error: every row is off, not "
        "a few)",
        phase, m.mean_rel_rms(), t.max_mean_rel_rms,
        reference_note(reference.mean_rel_rms(), reference)));
  }
}

// The run's gain over every comparison: a scale error (logits x 1.02, a wrong eps) moves it,
// noise does not.
void judge_gain(const MetricSummary& all, const MetricSummary& reference, const Thresholds& t,
                StepResult& step) {
  if (all.compared == 0) return;
  if (t.distribution_gated && !(std::abs(all.mean_gain() - 1.0) <= t.max_gain_bias)) {
    step.fail(
        fmt::format("mean logits gain {:.5f} over {} rows: |gain - 1| > {:.5g}{} (the device's "
                    "logits are scaled against golden)",
                    all.mean_gain(), all.compared, t.max_gain_bias,
                    reference_note(reference.mean_gain(), reference)));
  }
}

// The run against a frozen baseline (--baseline): each FP32 metric no worse than the
// baseline's by more than its opening (core/baseline.hpp).
void judge_baseline(const GoldenTotals& totals, const Baseline& b, const Thresholds& defaults,
                    std::array<StepResult, 3>& steps) {
  const std::string file = b.path.filename().string();
  auto phase = [&](const char* name, const MetricSummary& m, const Fp32Distance& base,
                   StepResult& step) {
    if (m.compared == 0) return;
    const Thresholds t = against_baseline(defaults, base);
    auto fail = [&](const char* what, double value, double limit, double was) {
      step.fail(fmt::format("{} {} {:.6g} is worse than the baseline's {:.6g} beyond {:.6g} ({})",
                            name, what, value, was, limit, file));
    };
    if (!(m.cosine_min >= t.min_cosine)) {
      fail("logits cosine min", m.cosine_min, t.min_cosine, base.cosine);
    }
    if (!(m.max_abs_error_max <= t.max_abs_error)) {
      fail("max abs error", m.max_abs_error_max, t.max_abs_error, base.max_abs_error);
    }
    if (!(m.top_k_overlap_min >= t.min_top_k_overlap)) {
      fail("top-k overlap min", m.top_k_overlap_min, t.min_top_k_overlap, base.top_k_overlap);
    }
    if (!(m.mean_rel_rms() <= t.max_mean_rel_rms)) {
      fail("mean relative RMS error", m.mean_rel_rms(), t.max_mean_rel_rms, base.rel_rms);
    }
  };
  phase("prefill", totals.prefill, b.prefill, steps[1]);
  phase("decode", totals.decode, b.decode, steps[2]);
  const MetricSummary all = merged(totals.prefill, totals.decode);
  if (all.compared == 0) return;
  const Thresholds t = against_baseline(defaults, b.run);
  const double bias = std::abs(all.mean_gain() - 1.0);
  if (!(bias <= t.max_gain_bias)) {
    steps[2].fail(
        fmt::format("|mean logits gain - 1| {:.6g} is worse than the baseline's {:.6g} "
                    "beyond {:.6g} ({})",
                    bias, b.run.gain_bias, t.max_gain_bias, file));
  }
  if (!(all.greedy_rate() >= t.min_greedy)) {
    steps[2].fail(
        fmt::format("greedy agreement {:.4f} is worse than the baseline's {:.4f} beyond "
                    "{:.4g} ({})",
                    all.greedy_rate(), b.run.greedy, t.min_greedy, file));
  }
}

nlohmann::json metrics_json(const GoldenTotals& totals, const Thresholds& defaults, size_t cases) {
  const MetricSummary all = merged(totals.prefill, totals.decode);
  const MetricSummary reference = merged(totals.reference_prefill, totals.reference_decode);
  const Thresholds t = fp32_gates(defaults, reference);
  const double free_rate = totals.free_total == 0 ? 1.0
                                                  : static_cast<double>(totals.free_agreed) /
                                                        static_cast<double>(totals.free_total);
  auto phase = [&](const MetricSummary& m, const MetricSummary& r) {
    const Thresholds pt = fp32_gates(defaults, r);
    const bool gated = pt.distribution_gated;
    nlohmann::json doc{
        {"cosine_min", gate(m.cosine_min, pt.min_cosine, true, gated)},
        {"max_abs_error_max", gate(m.max_abs_error_max, pt.max_abs_error, false, gated)},
        {"top_k_overlap_min", gate(m.top_k_overlap_min, pt.min_top_k_overlap, true)},
        {"mean_rel_rms", gate(m.mean_rel_rms(), pt.max_mean_rel_rms, false, gated)},
        {"rel_rms_max", m.rel_rms_max},
        {"compared", m.compared}};
    if (r.compared > 0) {
      // The contract reference over the same rows: the floor the thresholds opened to.
      doc["reference"] = {{"cosine_min", r.cosine_min},
                          {"max_abs_error_max", r.max_abs_error_max},
                          {"top_k_overlap_min", r.top_k_overlap_min},
                          {"mean_rel_rms", r.mean_rel_rms()},
                          {"mean_gain", r.mean_gain()},
                          {"greedy_rate", r.greedy_rate()},
                          {"compared", r.compared}};
    }
    return doc;
  };
  nlohmann::json doc = phase(all, reference);
  doc.erase("mean_rel_rms");  // gated per phase
  doc["cases"] = cases;
  doc["mean_gain"] =
      gate(std::abs(all.mean_gain() - 1.0), t.max_gain_bias, false, t.distribution_gated);
  doc["mean_gain"]["gain"] = all.mean_gain();
  doc["greedy_agreement"] = gate(all.greedy_rate(), t.min_greedy, true);
  doc["greedy_agreement"]["agreed"] = all.greedy_agree;
  doc["greedy_agreement"]["total"] = all.greedy_total;
  doc["greedy_agreement"]["tie_margin"] = t.tie_margin;
  doc["greedy_agreement"]["near_ties"] = all.near_ties;
  doc["greedy_agreement"]["near_tie_swaps"] = all.near_tie_swaps;
  doc["free_running_agreement"] =
      gate(free_rate, t.min_free_greedy.value_or(0.0), true, t.min_free_greedy.has_value());
  doc["free_running_agreement"]["agreed_tokens"] = totals.free_agreed;
  doc["free_running_agreement"]["total_tokens"] = totals.free_total;
  // Gated per row in the cases; the run's worst row is what the gate saw.
  doc["contract"] =
      gate(totals.contract.max_ulps, t.max_contract_ulps, false, totals.contract.rows > 0);
  doc["contract"]["available"] = totals.contract.rows > 0;
  doc["contract"]["mean"] =
      gate(totals.contract.mean_ulps(), t.max_contract_mean_ulps.value_or(0.0), false,
           totals.contract.rows > 0 && t.max_contract_mean_ulps.has_value());
  doc["contract"]["rows"] = totals.contract.rows;
  doc["contract"]["differing_logits"] = totals.contract.differing;
  doc["contract"]["logits"] = totals.contract.logits;
  doc["prefill"] = phase(totals.prefill, totals.reference_prefill);
  doc["decode"] = phase(totals.decode, totals.reference_decode);
  doc["fp32_gates"] =
      !defaults.distribution_gated
          ? "rank gates (no contract reference); the distribution metrics are reported, and "
            "gated only against a --baseline"
      : !defaults.scale_fp32_gates ? "fixed"
      : reference.compared > 0
          ? (defaults.routed_model ? "scaled by the contract reference, per-row gates uncapped "
                                     "(a mixture of experts)"
                                   : "scaled by the contract reference")
          : "fixed (no contract reference in the golden set)";
  doc["deterministic_cases"] = totals.deterministic;
  doc["device_ms"] = totals.device_ms;
  doc["readout_ms"] = totals.readout_ms;
  return doc;
}

// Step 7's rates: teacher-forced greedy agreement over prefill and decode, and the
// free-running agreed prefix when a threshold for it was given.
void judge_rates(const GoldenTotals& totals, const Thresholds& defaults, StepResult& step) {
  const MetricSummary all = merged(totals.prefill, totals.decode);
  const MetricSummary reference = merged(totals.reference_prefill, totals.reference_decode);
  const Thresholds t = fp32_gates(defaults, reference);
  if (!(all.greedy_rate() >= t.min_greedy)) {
    step.fail(
        fmt::format("greedy agreement {}/{} = {:.4f} < {:.4g}{} (rows whose golden top-1 leads "
                    "by more than {}; {} near-ties, {} swapped)",
                    all.greedy_agree, all.greedy_total, all.greedy_rate(), t.min_greedy,
                    reference_note(reference.greedy_rate(), reference), t.tie_margin, all.near_ties,
                    all.near_tie_swaps));
  }
  judge_gain(all, reference, t, step);
  if (totals.contract.rows > 0 && t.max_contract_mean_ulps &&
      !(totals.contract.mean_ulps() <= *t.max_contract_mean_ulps)) {
    step.fail(fmt::format(
        "mean error against the device-contract reference {:.4f} BF16 ULPs over {} rows > {} "
        "(--max-contract-mean-ulps)",
        totals.contract.mean_ulps(), totals.contract.rows, *t.max_contract_mean_ulps));
  }
  if (t.min_free_greedy && totals.free_total > 0) {
    const double rate =
        static_cast<double>(totals.free_agreed) / static_cast<double>(totals.free_total);
    if (!(rate >= *t.min_free_greedy)) {
      step.fail(fmt::format("free-running agreement {}/{} = {:.4f} < {}", totals.free_agreed,
                            totals.free_total, rate, *t.min_free_greedy));
    }
  }
}

void summarise(const GoldenTotals& totals, const std::vector<std::string>& names,
               std::array<StepResult, 3>& steps) {
  const MetricSummary all = merged(totals.prefill, totals.decode);
  steps[0].summary = fmt::format("cases {} ({}), {} submissions, CSRs set and read back",
                                 names.size(), fmt::join(names, ","), totals.submissions);
  // "0/8" would read as eight failures where nothing was checked: say what was.
  const std::string determinism =
      totals.determinism_checked == names.size()
          ? fmt::format("deterministic {}/{}", totals.deterministic, names.size())
      : totals.determinism_checked == 0
          ? std::string("determinism not checked (no case reached its second prefill)")
          : fmt::format("deterministic {}/{} checked ({} stopped before the check)",
                        totals.deterministic, totals.determinism_checked,
                        count_of(names.size() - totals.determinism_checked, "case"));
  const std::string free_running =
      totals.free_total == 0
          ? std::string("free-running not run (no case reached it)")
          : fmt::format("free-running {}/{}", totals.free_agreed, totals.free_total);
  // Nothing compared is said as such, never as a perfect cosine.
  steps[1].summary =
      totals.prefill.compared == 0
          ? fmt::format("no prefill row compared, {}", determinism)
          : fmt::format("cosine min {:.6f}, max abs err {:.4f}, top-k min {:.3f}, {}",
                        totals.prefill.cosine_min, totals.prefill.max_abs_error_max,
                        totals.prefill.top_k_overlap_min, determinism);
  steps[2].summary =
      totals.decode.compared == 0
          ? fmt::format("0 of {} steps: no decode row compared, {}", totals.decode_steps_expected,
                        free_running)
          : fmt::format(
                "{} of {} steps: cosine min {:.6f}, max abs err {:.4f}, top-k min {:.3f}, "
                "greedy {}/{} (+{} near-ties, {} swapped), {}",
                totals.decode.compared, totals.decode_steps_expected, totals.decode.cosine_min,
                totals.decode.max_abs_error_max, totals.decode.top_k_overlap_min, all.greedy_agree,
                all.greedy_total, all.near_ties, all.near_tie_swaps, free_running);
}

}  // namespace

std::vector<StepResult> steps_golden(Session& s, nlohmann::json& metrics) {
  std::array<StepResult, 3> steps;
  const char* names[] = {"inputs", "prefill", "decode"};
  for (int i = 0; i < 3; ++i) {
    steps[static_cast<size_t>(i)].number = 5 + i;
    steps[static_cast<size_t>(i)].name = names[i];
  }
  GoldenTotals totals;
  std::vector<std::string> case_names;
  std::array<std::vector<std::string>, kCasePhases> diagnosis;
  std::array<std::vector<std::string>, kCasePhases> case_failures;
  // Steps 5-7 print once every case has run: the long cases take seconds, so say where it is.
  Progress progress("golden cases", s.inputs.case_indices.size(),
                    s.options.progress && Progress::terminal());
  for (size_t i = 0; i < s.inputs.case_indices.size(); ++i) {
    const calbin::GoldenCase& golden = s.inputs.golden_case(i);
    progress.update(i, golden.name);
    spdlog::debug("case {}: prompt {} tokens, {} decode steps", golden.name, golden.prompt_len,
                  golden.decode_steps);
    const CaseResult r = run_golden_case(s, golden);
    case_names.push_back(r.name);
    totals.prefill.merge(r.prefill);
    totals.decode.merge(r.decode);
    totals.reference_prefill.merge(r.reference_prefill);
    totals.reference_decode.merge(r.reference_decode);
    totals.contract.merge(r.contract);
    totals.probes.merge(r.probes);
    totals.deterministic += r.deterministic ? 1 : 0;
    totals.determinism_checked += r.determinism_checked ? 1 : 0;
    totals.decode_steps_expected += golden.decode_steps;
    if (r.decode.compared < golden.decode_steps) totals.decode_unfinished.push_back(r.name);
    totals.free_agreed += r.free_agreed;
    totals.free_total += r.free_total;
    totals.submissions += r.submissions;
    totals.device_ms += r.device_ms;
    totals.readout_ms += r.readout_ms;
    for (size_t p = 0; p < kCasePhases; ++p) {
      case_failures[p].insert(case_failures[p].end(), r.failures[p].begin(), r.failures[p].end());
      steps[p].wall_ms += r.wall_ms[p];
      if (diagnosis[p].empty()) {  // the first case's diagnosis points at the cause
        diagnosis[p] = r.diagnosis[p];
      }
    }
    steps[2].details["cases"].push_back(r.to_json());
  }
  progress.clear();
  const Thresholds& t = s.options.thresholds;
  judge_metrics("prefill", totals.prefill, totals.reference_prefill, t, steps[1]);
  judge_metrics("decode", totals.decode, totals.reference_decode, t, steps[2]);
  judge_rates(totals, t, steps[2]);
  if (s.baseline) {
    judge_baseline(totals, *s.baseline, t, steps);
  }
  if (!totals.decode_unfinished.empty()) {
    // Decode was not verified where it did not run: never a pass on what is missing.
    steps[2].fail(fmt::format(
        "{} of {} teacher-forced decode steps ran: case{} {} stopped before {} decode finished "
        "(the failure that stopped {} is reported with its step)",
        totals.decode.compared, totals.decode_steps_expected,
        totals.decode_unfinished.size() == 1 ? "" : "s", fmt::join(totals.decode_unfinished, ", "),
        totals.decode_unfinished.size() == 1 ? "its" : "their",
        totals.decode_unfinished.size() == 1 ? "it" : "them"));
  }
  summarise(totals, case_names, steps);
  for (size_t p = 0; p < kCasePhases; ++p) {
    // The aggregate verdicts come first, then the cases' own failures.
    for (auto& failure : case_failures[p]) {
      steps[p].fail(std::move(failure));
    }
    if (!steps[p].passed()) {
      steps[p].diagnosis = diagnosis[p];
    }
  }
  metrics = metrics_json(totals, t, case_names.size());
  metrics["contract"]["in_golden"] = s.inputs.contract_source == "the golden set";
  metrics["golden_fingerprint"] = golden_fingerprint(s.inputs.golden, s.inputs.case_indices);
  if (s.baseline) {
    metrics["baseline"] = {{"path", s.baseline->path.string()}, {"applied", true}};
  }
  if (!s.inputs.calbin_fp32.empty() && totals.contract.rows > 0 && totals.contract.differing == 0 &&
      totals.contract.max_ulps == 0.0) {
    // The device computes its contract exactly, so what an FP32 gate saw is the golden's
    // distance from the calbin's numerics, against the contract's from the calbin's FP32.
    for (size_t p = 1; p < kCasePhases; ++p) {
      if (!steps[p].passed()) {
        steps[p].diagnosis.push_back(
            "golden: the device equals its contract reference in every logit; the FP32 gates "
            "compare the golden with the device and the contract reference with the calbin's "
            "own FP32 model, so the golden set disagrees with the model the calbin's weights "
            "describe (a different reference, weights, or a defect in either)");
      }
    }
  }
  metrics["contract"]["source"] = s.inputs.contract_source;
  // Where the numerics first leave the contract, for whichever numeric step failed: the
  // run-level means over every contract row, where a systematic defect stands out of noise.
  if (totals.contract.rows > 0) {
    const std::string where =
        totals.probes.describe(totals.contract.differing > 0 || totals.contract.max_ulps > 0.0);
    metrics["contract"]["localisation"] = where;
    metrics["contract"]["probe_mean_errors"] = totals.probes.mean_errors();
    for (size_t p = 1; p < kCasePhases; ++p) {
      if (!steps[p].passed()) {
        steps[p].diagnosis.push_back("numerics: " + where);
      }
    }
  }
  return {steps.begin(), steps.end()};
}

}  // namespace runner
