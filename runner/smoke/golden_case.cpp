#include "runner/smoke/golden_case.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "abi/calrt_ext.hpp"
#include "runner/core/golden_compare.hpp"
#include "runner/core/submission_inputs.hpp"
#include "runner/core/tensor_io.hpp"

namespace runner {
namespace {

// At most this many failure lines per phase and case: one broken device call repeated over
// thousands of decode steps should not bury the first, most telling one.
constexpr size_t kMaxFailuresPerPhase = 3;

std::string join(const std::vector<std::string>& parts) {
  return fmt::format("{}", fmt::join(parts, "; "));
}

class CaseRunner {
 public:
  CaseRunner(Session& session, const calbin::GoldenCase& golden)
      : s_(session),
        g_(golden),
        reference_(session.inputs.reference_case(golden)),
        top_k_(session.inputs.golden.top_k) {
    r_.name = golden.name;
    r_.prompt_len = golden.prompt_len;
    r_.decode_steps = golden.decode_steps;
  }

  CaseResult run() {
    try {
      run_phases();
    } catch (const std::exception& error) {
      fail(phase_, error.what(), true);
    }
    return std::move(r_);
  }

 private:
  void run_phases() {
    if (!golden_consistent()) {
      return;
    }
    const uint32_t capacity = kv_tokens_for(g_, s_.info.context);
    allocate_kv(capacity);
    phase_ = CasePhase::prefill;
    const auto first = prefill("prefill", true);
    if (!first) {
      return;
    }
    compare_prefill(*first);
    if (s_.options.bug == RunnerBug::stale_kv) {
      // The injected defect: decode runs on a fresh KV, not on the one prefill filled.
      kv_.free();
      allocate_kv(capacity);
    }
    if (!teacher_forced_decode()) {
      return;
    }
    phase_ = CasePhase::prefill;
    kv_.clear();
    fed_ = 0;
    const auto second = prefill("second prefill after Kv_Clear", false);
    if (!second) {
      return;
    }
    check_determinism(*first, *second);
    free_running_decode(*second);
    kv_.free();
  }

  bool golden_consistent() {
    const size_t steps = g_.decode_steps;
    const size_t vocab = s_.info.vocab;
    const bool ok = g_.prompt_len > 0 && g_.tokens.size() == g_.prompt_len &&
                    g_.prefill_logits.size() == vocab && g_.greedy.size() == steps + 1 &&
                    g_.top_ids.size() == steps * top_k_ && g_.top_logits.size() == steps * top_k_ &&
                    (g_.decode_logits.empty() || g_.decode_logits.size() == steps * vocab);
    if (!ok) {
      fail(CasePhase::inputs,
           "golden arrays do not match the case's prompt length, decode "
           "steps, top_k and the calbin's vocab",
           false);
    }
    return ok;
  }

  void allocate_kv(uint32_t capacity) {
    kv_ = calrt::Kv::allocate(s_.calbin, capacity);
    kv_.apply(s_.prefill.input);
    kv_.apply(s_.decode.input);
  }

  // Chunked prefill of the whole prompt; the logits of the last chunk. Each chunk's logits
  // meet the contract reference when `against_contract`.
  std::optional<std::vector<float>> prefill(const std::string& label, bool against_contract) {
    const uint32_t chunk = s_.info.prefill_chunk;
    const uint32_t chunks = (g_.prompt_len + chunk - 1) / chunk;
    std::optional<std::vector<float>> logits;
    for (uint32_t c = 0; c < chunks; ++c) {
      const uint32_t offset = c * chunk;
      const uint32_t count = std::min(chunk, g_.prompt_len - offset);
      const std::span<const int32_t> tokens(g_.tokens.data() + offset, count);
      auto row = submit(s_.prefill, tokens, static_cast<int32_t>(offset), offset,
                        CasePhase::prefill, fmt::format("{} chunk {}/{}", label, c + 1, chunks));
      if (!row) {
        return std::nullopt;
      }
      if (against_contract) {
        check_contract(*row, offset + count - 1, CasePhase::prefill);
      }
      logits = std::move(row->logits);
    }
    return logits;
  }

  // One decode submission of `token` as sequence token number `index` (0-based), with the
  // injected defects applied where asked.
  std::optional<DecodeRow> decode(int32_t token, uint32_t index, const std::string& label) {
    const RunnerBug bug = s_.options.bug;
    const auto position = static_cast<int32_t>(index + (bug == RunnerBug::position ? 1 : 0));
    const uint64_t past = index + (bug == RunnerBug::past_kv ? 1 : 0);
    return submit(s_.decode, std::span<const int32_t>(&token, 1), position, past, CasePhase::decode,
                  label);
  }

  bool teacher_forced_decode() {
    phase_ = CasePhase::decode;
    for (uint32_t step = 0; step < g_.decode_steps; ++step) {
      const auto row =
          decode(g_.greedy[step], g_.prompt_len + step, fmt::format("decode step {}", step));
      if (!row) {
        return false;
      }
      compare_decode(*row, step);
      check_contract(*row, g_.prompt_len + step, CasePhase::decode);
    }
    return true;
  }

  void free_running_decode(const std::vector<float>& prefill_logits) {
    phase_ = CasePhase::decode;
    // Counted from here: a case that stopped before its free-running chain checked none of
    // it, which is not the same as disagreeing with all of it.
    r_.free_total = g_.decode_steps + 1;
    int32_t token = argmax(prefill_logits);
    if (token != g_.greedy[0]) {
      return;
    }
    r_.free_agreed = 1;
    for (uint32_t step = 0; step < g_.decode_steps; ++step) {
      const auto row =
          decode(token, g_.prompt_len + step, fmt::format("free-running decode step {}", step));
      if (!row) {
        return;
      }
      token = row->best();
      if (token != g_.greedy[step + 1]) {
        return;  // diverged: the rest of the sequence cannot agree
      }
      ++r_.free_agreed;
    }
  }

  std::optional<DecodeRow> submit(ModelIo& io, std::span<const int32_t> tokens,
                                  int32_t first_position, uint64_t past, CasePhase phase,
                                  const std::string& label);
  void write_inputs(ModelIo& io, std::span<const int32_t> tokens, int32_t first_position,
                    uint64_t past);
  std::optional<DecodeRow> run_job(ModelIo& io, CasePhase phase);
  void check_kv_bookkeeping(CasePhase phase);
  void compare_prefill(const std::vector<float>& logits);
  void compare_decode(const DecodeRow& row, uint32_t step);
  // Folds one comparison (and the contract reference's of the same row, when the golden set
  // has it) into the case and judges it.
  void record(CasePhase phase, const Comparison& c, const std::optional<Comparison>& reference,
              uint32_t step);
  void check_contract(const DecodeRow& row, uint64_t index, CasePhase phase);
  void read_probes(const calrt::Job& job);
  // The relative error of the last job's probes at each point against the contract's for
  // the row at `at`; empty when either side has none (the reason goes into r_.probes).
  std::vector<double> probe_errors(size_t at);
  // Whether the golden greedy token is clear of its runner-up by more than the tie margin:
  // only then does a disagreement count against the device.
  bool decisive(const Comparison& c) const {
    return c.golden_margin > s_.options.thresholds.tie_margin;
  }
  void judge(CasePhase phase, const Comparison& comparison,
             const std::optional<Comparison>& reference);
  void check_determinism(const std::vector<float>& first, const std::vector<float>& second);
  void fail(CasePhase phase, const std::string& message, bool with_diagnosis);

  Session& s_;
  const calbin::GoldenCase& g_;
  const calbin::GoldenCase& reference_;  // what the contract row is measured against
  const size_t top_k_;
  CaseResult r_;
  calrt::Kv kv_;
  uint32_t fed_ = 0;  // tokens of the current sequence fed so far
  CasePhase phase_ = CasePhase::inputs;
  Submission last_;  // the submission in progress or last made
  bool have_submission_ = false;
  // The last job's probes (CALRT_EXT_PROBE), [points][hidden]; empty when the runtime or the
  // golden set has none.
  std::vector<std::vector<float>> probes_;
  std::string probes_error_;
};

std::optional<DecodeRow> CaseRunner::submit(ModelIo& io, std::span<const int32_t> tokens,
                                            int32_t first_position, uint64_t past, CasePhase phase,
                                            const std::string& label) {
  const calrt::KvInfo before = kv_.info();
  last_ = Submission{r_.name,
                     label,
                     tokens.size(),
                     past,
                     first_position,
                     first_position + static_cast<int32_t>(tokens.size()) - 1,
                     fed_,
                     before.capacity_tokens,
                     before.filled_tokens,
                     0,
                     false};
  have_submission_ = true;
  ++r_.submissions;
  spdlog::debug("case {}, {}: cur_seq_len={} past_kv_cur_seq_len={} positions {}..{}, KV {}/{}",
                r_.name, label, last_.cur_seq_len, past, last_.first_position, last_.last_position,
                before.filled_tokens, before.capacity_tokens);
  phase_ = CasePhase::inputs;
  const Stopwatch fill;
  write_inputs(io, tokens, first_position, past);
  r_.wall_ms[0] += fill.elapsed_ms();
  phase_ = phase;
  const Stopwatch job;
  auto row = run_job(io, phase);
  r_.wall_ms[static_cast<size_t>(phase)] += job.elapsed_ms();
  if (row) {
    fed_ += static_cast<uint32_t>(tokens.size());
  }
  return row;
}

// Step 5: tokens and positions into their tensors, the two CSRs set and read back.
void CaseRunner::write_inputs(ModelIo& io, std::span<const int32_t> tokens, int32_t first_position,
                              uint64_t past) {
  const CsrValues read = write_submission(io, tokens, first_position, past, s_.timeout());
  if (read.cur_seq_len != tokens.size() || read.past_kv_cur_seq_len != past) {
    fail(CasePhase::inputs,
         fmt::format("CSRs read back as cur_seq_len={} past_kv_cur_seq_len={}, set {} and {}",
                     read.cur_seq_len, read.past_kv_cur_seq_len, tokens.size(), past),
         false);
  }
}

std::optional<DecodeRow> CaseRunner::run_job(ModelIo& io, CasePhase phase) {
  const FinishedJob done = run_model_job(s_, io);
  if (!done.failure.empty()) {
    fail(phase, done.failure, true);
    return std::nullopt;
  }
  r_.device_ms +=
      std::chrono::duration<double, std::milli>(done.status.end_time - done.status.start_time)
          .count();
  read_probes(done.job);
  last_.kv_fill_after = kv_.info().filled_tokens;
  last_.kv_info_after = true;
  check_kv_bookkeeping(phase);
  const Stopwatch readout;
  DecodeRow row;
  if (io.ranked()) {
    row = read_decode_row(io, s_.timeout());
    if (const std::string defect = ranked_row_defect(row, s_.info.vocab); !defect.empty()) {
      fail(phase, defect, true);
      return std::nullopt;
    }
  } else {
    const calrt::Mapping map = io.output.map(io.logits_output, s_.timeout());
    calrt::TensorDesc layout = io.logits();
    if (s_.options.bug == RunnerBug::tile16 && layout.tile_d0 != 0) {
      layout.tile_d0 = 16;  // the injected defect: a runner that assumes the tiny calbin's tile
    }
    // Converted and ranked in one pass (read_row_pick): the comparison takes the row's
    // argmax and top k from it instead of reading the row twice more.
    row.logits.resize(physical_shape(layout).cols);
    row.pick = read_row_pick(map.bytes(), layout, 0, row.logits, top_k_);
  }
  r_.readout_ms += readout.elapsed_ms();
  return row;
}

// The KV must continue the sequence exactly: the job starts at the fill level and extends
// it by cur_seq_len. Anything else means the runner or the device lost track of the KV.
void CaseRunner::check_kv_bookkeeping(CasePhase phase) {
  const Submission& s = last_;
  if (s.past_kv_cur_seq_len != s.kv_fill_before ||
      s.kv_fill_after != s.past_kv_cur_seq_len + s.cur_seq_len) {
    fail(phase,
         fmt::format("KV bookkeeping: fill level {} -> {} for past_kv_cur_seq_len {} "
                     "and cur_seq_len {}",
                     s.kv_fill_before, s.kv_fill_after, s.past_kv_cur_seq_len, s.cur_seq_len),
         true);
  }
}

nlohmann::json comparison_json(const char* phase, uint32_t step, const Comparison& c) {
  return {{"phase", phase},
          {"step", step},
          {"cosine", c.cosine},
          {"max_abs_error", c.max_abs_error},
          {"gain", c.gain},
          {"rel_rms", c.rel_rms},
          {"top_k_overlap", c.top_k_overlap},
          {"argmax", c.argmax},
          {"golden_argmax", c.expected_argmax},
          {"golden_margin", c.golden_margin}};
}

void CaseRunner::compare_prefill(const std::vector<float>& logits) {
  const Comparison c = runner::compare_prefill(logits, g_, top_k_);
  std::optional<Comparison> reference;
  if (const auto row = contract_row(reference_, reference_.prompt_len - 1, logits.size())) {
    reference = runner::compare_prefill(*row, reference_, top_k_);
  }
  record(CasePhase::prefill, c, reference, 0);
}

void CaseRunner::compare_decode(const DecodeRow& row, uint32_t step) {
  const Comparison c = runner::compare_decode(row, g_, step, top_k_);
  const std::optional<Comparison> reference =
      compare_contract_decode(row, reference_, g_.prompt_len + step, step, s_.info.vocab, top_k_);
  record(CasePhase::decode, c, reference, step);
}

void CaseRunner::record(CasePhase phase, const Comparison& c,
                        const std::optional<Comparison>& reference, uint32_t step) {
  const bool prefill = phase == CasePhase::prefill;
  nlohmann::json entry = comparison_json(prefill ? "prefill" : "decode", step, c);
  MetricSummary& summary = prefill ? r_.prefill : r_.decode;
  summary.add(c.cosine, c.max_abs_error, c.top_k_overlap);
  summary.add_bias(c.gain, c.rel_rms);
  summary.add_greedy(c.argmax == c.expected_argmax, decisive(c));
  if (reference) {
    // The same comparison for the contract reference's row: the floor the scaled FP32 gates
    // stand on, and the data they are calibrated on.
    entry["reference"] = comparison_json(prefill ? "prefill" : "decode", step, *reference);
    entry["reference"].erase("phase");
    entry["reference"].erase("step");
    MetricSummary& floor = prefill ? r_.reference_prefill : r_.reference_decode;
    floor.add(reference->cosine, reference->max_abs_error, reference->top_k_overlap);
    floor.add_bias(reference->gain, reference->rel_rms);
    floor.add_greedy(reference->argmax == reference->expected_argmax, decisive(*reference));
  }
  r_.comparisons.push_back(std::move(entry));
  judge(phase, c, reference);
}

void CaseRunner::read_probes(const calrt::Job& job) {
  probes_.clear();
  if (g_.contract_probes.empty() || !probes_error_.empty()) {
    return;
  }
  const calrt::JobProbes probes = calrt::JobProbes::of(job);
  if (!probes) {
    probes_error_ = "the runtime offers no layer probes (CALRT_EXT_PROBE)";
    return;
  }
  try {
    probes_ = probes.read_all();
  } catch (const calrt::Error& error) {
    // Probes only explain a failure; a runtime that cannot give them fails nothing.
    probes_error_ = std::string("Probe_Read failed: ") + error.what();
  }
}

std::vector<double> CaseRunner::probe_errors(size_t at) {
  const size_t points = g_.probe_points, width = g_.probe_width;
  std::string why;
  if (g_.contract_probes.empty()) {
    why = "the golden set has no contract probes";
  } else if (probes_.empty()) {
    why = probes_error_.empty() ? "the device gave no probes" : probes_error_;
  } else if (probes_.size() != points || probes_[0].size() != width) {
    why = fmt::format("the device's probes are [{}][{}], the golden set's [{}][{}]", probes_.size(),
                      probes_[0].size(), points, width);
  }
  if (!why.empty()) {
    if (r_.probes.unavailable.empty()) r_.probes.unavailable = why;
    return {};
  }
  const std::span<const float> golden(g_.contract_probes.data() + at * points * width,
                                      points * width);
  std::vector<double> errors;
  for (size_t p = 0; p < points; ++p) {
    errors.push_back(relative_error(probes_[p], golden.subspan(p * width, width)));
  }
  return errors;
}

// The device-contract gate, row by row: the contract reference computes exactly the numerics
// the device declares in the same order of reductions, so any difference is a defect,
// however small next to the quantisation noise the FP32 gates must allow.
void CaseRunner::check_contract(const DecodeRow& device_row, uint64_t index, CasePhase phase) {
  const std::optional<size_t> at = contract_row_at(g_, index);
  if (!at) {
    return;
  }
  const size_t vocab = s_.info.vocab;
  if ((*at + 1) * vocab > g_.contract_logits.size()) {
    fail(phase,
         fmt::format("token {}: the golden contract rows hold {} values, too few for a logits "
                     "row of {}",
                     index, g_.contract_logits.size(), vocab),
         false);
    return;
  }
  const std::span<const float> row =
      std::span<const float>(g_.contract_logits).subspan(*at * vocab, vocab);
  const ContractComparison c = compare_contract(device_row, row);
  const size_t compared = device_row.logits.size();
  r_.contract.add(c, compared);
  const std::vector<double> errors = probe_errors(*at);
  nlohmann::json entry{{"phase", "contract"},      {"token", index},
                       {"ulps", c.ulps},           {"mean_ulps", c.mean_ulps},
                       {"differing", c.differing}, {"worst_id", c.worst_id}};
  if (!errors.empty()) {
    entry["probe_errors"] = errors;
    r_.probes.add(errors);
  }
  r_.comparisons.push_back(std::move(entry));
  const double limit = s_.options.thresholds.max_contract_ulps;
  if (!(c.ulps <= limit)) {
    fail(phase,
         fmt::format("token {}: {:.1f} BF16 ULPs from the device-contract reference > {} ({}; "
                     "{} of {} logits differ)",
                     index, c.ulps, limit, c.worst(), c.differing, compared),
         true);
  }
}

// Per-comparison thresholds fail the phase; a greedy disagreement alone does not (it is
// judged as a rate), but both leave a diagnosis in case the step fails.
void CaseRunner::judge(CasePhase phase, const Comparison& c,
                       const std::optional<Comparison>& reference) {
  const RowJudgement judged = judge_row(c, s_.options.thresholds, reference);
  const std::vector<std::string> all = judged.all();
  if (all.empty()) {
    return;
  }
  auto& diagnosis = r_.diagnosis[static_cast<size_t>(phase)];
  if (diagnosis.empty()) {
    diagnosis = diagnose(last_, join(all));
  }
  if (!judged.failures.empty()) {
    fail(phase, join(judged.failures), false);
  }
}

void CaseRunner::check_determinism(const std::vector<float>& first,
                                   const std::vector<float>& second) {
  r_.determinism_checked = true;
  r_.deterministic = first.size() == second.size() &&
                     std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0;
  if (!r_.deterministic) {
    size_t differ = 0;
    for (size_t i = 0; i < std::min(first.size(), second.size()); ++i) {
      differ += std::memcmp(&first[i], &second[i], sizeof(float)) != 0 ? 1 : 0;
    }
    fail(CasePhase::prefill,
         fmt::format("not deterministic: the prefill after Kv_Clear differs from the first in "
                     "{} of {} logits",
                     differ, first.size()),
         true);
  }
}

void CaseRunner::fail(CasePhase phase, const std::string& message, bool with_diagnosis) {
  const auto index = static_cast<size_t>(phase);
  auto& failures = r_.failures[index];
  const std::string where = have_submission_ ? fmt::format("case {}, {}: ", r_.name, last_.phase)
                                             : fmt::format("case {}: ", r_.name);
  if (failures.size() < kMaxFailuresPerPhase) {
    failures.push_back(where + message);
  } else if (failures.size() == kMaxFailuresPerPhase) {
    failures.push_back(fmt::format("case {}: further failures of this step not shown", r_.name));
  }
  if (with_diagnosis && have_submission_ && r_.diagnosis[index].empty()) {
    r_.diagnosis[index] = diagnose(last_, message);
  }
  spdlog::debug("{}{}", where, message);
}

}  // namespace

CaseResult run_golden_case(Session& session, const calbin::GoldenCase& golden) {
  return CaseRunner(session, golden).run();
}

nlohmann::json CaseResult::to_json() const {
  auto summary = [](const MetricSummary& m) {
    return nlohmann::json{{"cosine_min", m.cosine_min},
                          {"max_abs_error_max", m.max_abs_error_max},
                          {"top_k_overlap_min", m.top_k_overlap_min},
                          {"greedy_agree", m.greedy_agree},
                          {"greedy_total", m.greedy_total},
                          {"near_ties", m.near_ties},
                          {"near_tie_swaps", m.near_tie_swaps},
                          {"mean_gain", m.mean_gain()},
                          {"mean_rel_rms", m.mean_rel_rms()},
                          {"compared", m.compared}};
  };
  return {{"name", name},
          {"prompt_len", prompt_len},
          {"decode_steps", decode_steps},
          {"submissions", submissions},
          {"prefill", summary(prefill)},
          {"decode", summary(decode)},
          {"reference",
           {{"prefill", summary(reference_prefill)}, {"decode", summary(reference_decode)}}},
          {"contract",
           {{"rows", contract.rows},
            {"max_ulps", contract.max_ulps},
            {"differing_logits", contract.differing},
            {"logits", contract.logits}}},
          {"deterministic", deterministic},
          {"free_running_agreed", free_agreed},
          {"free_running_total", free_total},
          {"wall_ms", {{"inputs", wall_ms[0]}, {"prefill", wall_ms[1]}, {"decode", wall_ms[2]}}},
          {"device_ms", device_ms},
          {"readout_ms", readout_ms},
          {"comparisons", comparisons}};
}

}  // namespace runner
