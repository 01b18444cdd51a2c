// Smoke step 10, for a calbin with batch B > 1: the golden cases decoded B at a time, one
// sequence per row of the decode model (calrt.h, Kv_Apply). Steps 5-7 ran every case alone in
// row 0; here each row must still meet its own case's golden and contract rows while the
// other rows hold other sequences, so a device whose rows leak into each other (a shared KV,
// rows written to the wrong place) fails. A group's cases leave the batch one step apart,
// the first case first, and the remaining rows are applied again from row 0, as a serving
// loop does: every group thus moves its sequences to other rows and leaves rows idle, which
// must read zero. (Golden cases all decode the same number of steps; left to themselves
// they would leave together and no row would ever move or idle.)
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "abi/calrt.hpp"
#include "runner/core/golden_compare.hpp"
#include "runner/core/session.hpp"
#include "runner/core/submission_inputs.hpp"
#include "runner/core/tensor_io.hpp"
#include "runner/smoke/golden_case.hpp"

namespace runner {
namespace {

// At most this many failure lines: one broken row repeated over every step should not bury
// the first.
constexpr size_t kMaxFailures = 6;

struct Sequence {
  const calbin::GoldenCase* golden = nullptr;
  uint32_t steps = 0;  // decode steps in the batch: case i of n leaves n - 1 - i steps early
  calrt::Kv kv;
};

class BatchRunner {
 public:
  explicit BatchRunner(Session& session) : s_(session), top_k_(session.inputs.golden.top_k) {}

  StepResult run() {
    const Stopwatch wall;
    step_.number = 10;
    step_.name = "batch";
    const uint32_t batch = s_.info.batch;
    const size_t cases = s_.inputs.case_indices.size();
    size_t groups = 0;
    try {
      for (size_t first = 0; first < cases; first += batch) {
        std::vector<Sequence> group;
        const size_t last = std::min<size_t>(cases, first + batch);
        for (size_t i = first; i < last; ++i) {
          const calbin::GoldenCase& g = s_.inputs.golden_case(i);
          const auto early = static_cast<uint32_t>(last - 1 - i);
          // At least one step each; a case of one step cannot leave early.
          const uint32_t steps = g.decode_steps > early ? g.decode_steps - early
                                                        : std::min<uint32_t>(g.decode_steps, 1);
          group.push_back({&g, steps, {}});
        }
        ++groups;
        if (!run_group(group)) break;
      }
    } catch (const std::exception& error) {
      fail(error.what());
    }
    const double contract = contract_.rows > 0 ? contract_.max_ulps : 0.0;
    // Nothing compared is said as such, never as a perfect cosine.
    step_.summary =
        decode_.compared == 0
            ? fmt::format(
                  "{} cases, {} group(s) of up to {} rows, {} decode submissions: no row "
                  "compared",
                  cases, groups, batch, submissions_)
            : fmt::format(
                  "{} cases in {} group(s) of up to {} rows, {} decode submissions: {} "
                  "rows, cosine min {:.6f}, greedy {}/{}, contract max {:.1f} ULPs over {} "
                  "rows, {} idle rows checked",
                  cases, groups, batch, submissions_, decode_.compared, decode_.cosine_min,
                  decode_.greedy_agree, decode_.greedy_total, contract, contract_.rows, idle_rows_);
    const Thresholds& t = s_.options.thresholds;
    if (decode_.greedy_total > 0 && !(decode_.greedy_rate() >= t.min_greedy)) {
      fail(fmt::format("greedy agreement {}/{} = {:.4f} < {:.4g} over the batch rows",
                       decode_.greedy_agree, decode_.greedy_total, decode_.greedy_rate(),
                       t.min_greedy));
    }
    if (decode_.compared < expected_rows_) {
      fail(fmt::format("{} of {} batch rows were compared: a group stopped early", decode_.compared,
                       expected_rows_));
    }
    step_.details = {{"groups", groups},
                     {"rows_compared", decode_.compared},
                     {"submissions", submissions_},
                     {"cosine_min", decode_.cosine_min},
                     {"greedy_agree", decode_.greedy_agree},
                     {"greedy_total", decode_.greedy_total},
                     {"contract_max_ulps", contract},
                     {"contract_rows", contract_.rows},
                     {"idle_rows_checked", idle_rows_}};
    step_.wall_ms = wall.elapsed_ms();
    return std::move(step_);
  }

 private:
  // Prefills every sequence of the group alone, then decodes them together, teacher-forced.
  bool run_group(std::vector<Sequence>& group) {
    uint32_t steps = 0;
    for (Sequence& seq : group) {
      const calbin::GoldenCase& g = *seq.golden;
      expected_rows_ += seq.steps;
      steps = std::max(steps, seq.steps);
      seq.kv = calrt::Kv::allocate(s_.calbin, kv_tokens_for(g, s_.info.context));
      seq.kv.apply(s_.prefill.input);
      if (!prefill(seq)) return false;
    }
    for (uint32_t step = 0; step < steps; ++step) {
      std::vector<Sequence*> live;
      for (Sequence& seq : group) {
        if (step < seq.steps) live.push_back(&seq);
      }
      if (!decode(live, step)) return false;
    }
    return true;
  }

  bool prefill(Sequence& seq) {
    const calbin::GoldenCase& g = *seq.golden;
    const uint32_t chunk = s_.info.prefill_chunk;
    for (uint32_t offset = 0; offset < g.prompt_len; offset += chunk) {
      const uint32_t count = std::min(chunk, g.prompt_len - offset);
      const std::span<const int32_t> tokens(g.tokens.data() + offset, count);
      write_submission(s_.prefill, tokens, static_cast<int32_t>(offset), offset, s_.timeout());
      if (!run_job(s_.prefill, fmt::format("case {} prefill at {}", g.name, offset))) return false;
    }
    return true;
  }

  // One submission: row r is live[r]'s token at its next position.
  bool decode(const std::vector<Sequence*>& live, uint32_t step) {
    std::vector<int32_t> tokens, positions;
    for (size_t row = 0; row < live.size(); ++row) {
      const calbin::GoldenCase& g = *live[row]->golden;
      live[row]->kv.apply(s_.decode.input, static_cast<uint32_t>(row));
      tokens.push_back(g.greedy[step]);
      positions.push_back(static_cast<int32_t>(g.prompt_len + step));
    }
    {
      const calrt::Mapping map = s_.decode.input.map(s_.decode.token_input, s_.timeout());
      write_column_i32(map.bytes(), s_.decode.token(), tokens);
    }
    {
      const calrt::Mapping map = s_.decode.input.map(s_.decode.position_input, s_.timeout());
      write_column_i32(map.bytes(), s_.decode.position(), positions);
    }
    s_.decode.input.set_csr(s_.decode.cur_seq_len_csr, live.size());
    s_.decode.input.set_csr(s_.decode.past_kv_csr, 0);  // not read: each row's past is its position
    ++submissions_;
    if (!run_job(s_.decode, fmt::format("decode step {} of {} rows", step, live.size()))) {
      return false;
    }
    const calrt::TensorDesc& layout = s_.decode.ranked() ? s_.decode.top_ids() : s_.decode.logits();
    const size_t rows = static_cast<size_t>(layout.shape.empty() ? 0 : layout.shape.front());
    const std::vector<DecodeRow> outputs =
        read_decode_rows(s_.decode, s_.decode.output, rows, s_.timeout());
    for (size_t row = 0; row < rows; ++row) {
      const DecodeRow& output = outputs[row];
      if (row >= live.size()) {
        ++idle_rows_;
        const auto nonzero = [](auto v) { return v != 0; };
        if (std::any_of(output.logits.begin(), output.logits.end(), nonzero) ||
            std::any_of(output.ids.begin(), output.ids.end(), nonzero)) {
          fail(fmt::format("decode step {}: idle row {} of {} holds non-zero {}", step, row, rows,
                           output.ranked() ? "ids or logits" : "logits"));
        }
        continue;
      }
      compare(*live[row], row, step, output);
    }
    return true;
  }

  // Row `row`'s logits against its case's golden and contract rows, and its KV's fill level.
  void compare(const Sequence& seq, size_t row, uint32_t step, const DecodeRow& output) {
    const calbin::GoldenCase& g = *seq.golden;
    const uint64_t index = g.prompt_len + step;
    const std::string where = fmt::format("case {} in row {}, decode step {}", g.name, row, step);
    const size_t vocab = s_.info.vocab;
    if (output.ranked()) {
      if (const std::string defect = ranked_row_defect(output, vocab); !defect.empty()) {
        fail(where + ": " + defect);
        return;
      }
    }
    const Comparison c = compare_decode(output, g, step, top_k_);
    const std::optional<Comparison> reference =
        compare_contract_decode(output, s_.inputs.reference_case(g), index, step, vocab, top_k_);
    decode_.add(c.cosine, c.max_abs_error, c.top_k_overlap);
    decode_.add_bias(c.gain, c.rel_rms);
    const bool decisive = c.golden_margin > s_.options.thresholds.tie_margin;
    decode_.add_greedy(c.argmax == c.expected_argmax, decisive);
    const Thresholds& t = s_.options.thresholds;
    // The greedy disagreement is judged as a rate (decode_.add_greedy above).
    for (const std::string& reason : judge_row(c, t, reference).failures) {
      fail(where + ": " + reason);
    }
    if (const auto contract_logits = contract_row(g, index, vocab)) {
      const ContractComparison cc = compare_contract(output, *contract_logits);
      contract_.add(cc, output.logits.size());
      if (!(cc.ulps <= t.max_contract_ulps)) {
        fail(fmt::format("{}: {:.1f} BF16 ULPs from the device-contract reference > {} ({})", where,
                         cc.ulps, t.max_contract_ulps, cc.worst()));
      }
    }
    const uint32_t filled = seq.kv.info().filled_tokens;
    if (filled != index + 1) {
      fail(fmt::format("{}: its KV fill level is {} after the step, not {}", where, filled,
                       index + 1));
    }
  }

  bool run_job(ModelIo& io, const std::string& label) {
    const FinishedJob done = run_model_job(s_, io);
    if (!done.failure.empty()) fail(label + ": " + done.failure);
    return done.failure.empty();
  }

  void fail(std::string message) {
    if (++failures_ <= kMaxFailures) {
      step_.fail(std::move(message));
    } else if (failures_ == kMaxFailures + 1) {
      step_.fail("further failures of this step are left out");
    }
  }

  Session& s_;
  const size_t top_k_;
  StepResult step_;
  MetricSummary decode_;
  ContractSummary contract_;
  uint64_t expected_rows_ = 0;
  uint64_t submissions_ = 0;
  uint64_t idle_rows_ = 0;
  size_t failures_ = 0;
};

}  // namespace

StepResult step_batch(Session& session) { return BatchRunner(session).run(); }

}  // namespace runner
