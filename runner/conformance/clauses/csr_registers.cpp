// CSR: control/status registers. abi/CONFORMANCE.md#csr-controlstatus-registers
#include <fmt/format.h>
#include <unistd.h>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "runner/conformance/clauses/clauses.hpp"
#include "runner/core/session.hpp"
#include "runner/core/submission_inputs.hpp"

namespace runner {
namespace {

void csr_roundtrip(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  calrt::Buffer other = calrt::Buffer::create(f.calbin, f.prefill.name(), calrt::Direction::input);
  for (const calrt::CsrDesc& csr : f.prefill.desc.csrs) {
    for (const uint64_t value : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 40, ~uint64_t{0}}) {
      f.prefill.input.set_csr(csr.index, value);
      expect_equal(f.prefill.input.csr(csr.index), value, "CSR " + csr.name + " read back");
      expect_equal(other.csr(csr.index), 0u, "CSR " + csr.name + " of another buffer");
    }
  }
}

void csr_range(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::buffers);
  const auto count = static_cast<uint32_t>(f.prefill.desc.csrs.size());
  expect_code(set_csr(ctx, f.prefill.input.get(), count, 1), CALRT_OUT_OF_RANGE,
              "Buffer_SetCsr(csr_count)");
  uint64_t value = 0;
  expect_code(get_csr(ctx, f.prefill.input.get(), count, &value), CALRT_OUT_OF_RANGE,
              "Buffer_GetCsr(csr_count)");
}

void csr_output(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::buffers);
  expect_code(set_csr(ctx, f.prefill.output.get(), 0, 1), CALRT_INVALID_ARGUMENT,
              "Buffer_SetCsr of an output buffer");
  uint64_t value = 0;
  expect_code(get_csr(ctx, f.prefill.output.get(), 0, &value), CALRT_INVALID_ARGUMENT,
              "Buffer_GetCsr of an output buffer");
}

// Submits what the input buffer holds; the job's final status, or nullopt when Job_Submit
// refused it (then `refused` holds why).
std::optional<calrt::JobStatus> run_held_inputs(ClauseContext& ctx, const Fixture& f,
                                                CallOutcome* refused) {
  calrt::Job job;
  *refused =
      ctx.submit_raw(f, f.prefill.name(), f.prefill.input.get(), f.prefill.output.get(), &job);
  if (!refused->ok()) return std::nullopt;
  require(job.wait(kClauseWait) == calrt::WaitResult::ready, "Job_Wait: NOT_READY");
  return job.status();
}

// A submission the device must not run: refused, or FAILED with one of the codes, never
// COMPLETED; the KV's fill level stays `fill`.
void expect_not_run(ClauseContext& ctx, const Fixture& f, const calrt::Kv& kv, uint32_t fill,
                    CalrtCode code, CalrtCode other, const std::string& what) {
  CallOutcome refused;
  const auto status = run_held_inputs(ctx, f, &refused);
  if (!status) {
    expect_code(refused, code, other, what + " (Job_Submit)");
  } else {
    require(status->state == calrt::JobState::failed,
            fmt::format("{}: the job ended {}, expected FAILED or a refused submission", what,
                        calrt::to_string(status->state)));
    expect_code(CallOutcome{status->code, status->message}, code, other, what);
  }
  const uint32_t now = kv.info().filled_tokens;
  require(now == fill, fmt::format("{}: the KV's fill level went from {} to {}", what, fill, now));
}

// The CSRs say where a prefill chunk goes: past_kv_cur_seq_len is where it starts in the KV,
// cur_seq_len how many of its tokens count. Neither is corrected: a chunk that does not fit
// the KV handle or the model's chunk fails instead of being shortened or moved.
void csr_kv_position(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  const uint32_t half = kJobTokens / 2;
  calrt::Kv kv = ctx.apply_kv(f, f.prefill, kJobTokens);
  const std::vector<int32_t> tokens(half, 0);
  CallOutcome refused;
  auto chunk = [&](int32_t first, uint64_t past, const char* what) {
    write_submission(f.prefill, tokens, first, past, kClauseWait);
    const auto status = run_held_inputs(ctx, f, &refused);
    require(status.has_value(), fmt::format("{}: Job_Submit: {}", what, refused.message));
    require(status->state == calrt::JobState::completed,
            fmt::format("{}: the job ended {} ({})", what, calrt::to_string(status->state),
                        status->message));
  };
  chunk(0, 0, "the first chunk (past 0)");
  chunk(static_cast<int32_t>(half), half, "the second chunk (past 8)");
  const uint32_t fill = kv.info().filled_tokens;
  require(fill == 2 * half,
          fmt::format("after chunks of {} at past 0 and past {}, the KV's fill level is {}, "
                      "expected {}: past_kv_cur_seq_len was not where the chunk went",
                      half, half, fill, 2 * half));

  // past 8 + 16 tokens on a KV of 16: past the handle's capacity.
  kv.clear();
  chunk(0, 0, "the first chunk after Kv_Clear");
  write_submission(f.prefill, std::vector<int32_t>(kJobTokens, 0), static_cast<int32_t>(half), half,
                   kClauseWait);
  expect_not_run(ctx, f, kv, half, CALRT_OUT_OF_RANGE, CALRT_KV_EXHAUSTED,
                 "a chunk of 16 at past 8 on a KV of 16");

  // One token more than the model's chunk, on a KV with room for it: only the chunk bound
  // can refuse it.
  const uint32_t over = f.info.prefill_chunk + 1;
  if (over > f.info.context) return;  // no KV holds it: the bound cannot be told apart
  calrt::Kv roomy = ctx.apply_kv(f, f.prefill, over);
  write_submission(f.prefill, tokens, 0, 0, kClauseWait);
  expect_code(set_csr(ctx, f.prefill.input.get(), f.prefill.cur_seq_len_csr, over), CALRT_OK,
              "Buffer_SetCsr(cur_seq_len, chunk + 1)");
  expect_not_run(ctx, f, roomy, 0, CALRT_OUT_OF_RANGE, CALRT_INVALID_ARGUMENT,
                 fmt::format("cur_seq_len {} in a model of chunk {} (KV of {})", over,
                             f.info.prefill_chunk, over));
}

}  // namespace

std::vector<Clause> clauses_csr() {
  return {
      {"CSR.1", "CSR", "set and get exactly", csr_roundtrip},
      {"CSR.2", "CSR", "CSR index out of range", csr_range},
      {"CSR.3", "CSR", "output buffers have no CSRs", csr_output},
      {"CSR.4", "CSR", "KV position CSRs are honoured", csr_kv_position},
  };
}

}  // namespace runner
