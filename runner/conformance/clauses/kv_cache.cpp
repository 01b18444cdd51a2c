// KV: KV cache. abi/CONFORMANCE.md#kv-kv-cache
#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>
#include "abi/calrt_ext.hpp"

#include "runner/conformance/clauses/clauses.hpp"

namespace runner {
namespace {

CallOutcome allocate(ClauseContext& ctx, const Fixture& f, uint32_t tokens, calrt::Kv* out) {
  auto args = args_of<Calrt_Kv_Allocate_Args>();
  args.calbin = f.calbin.get();
  args.capacity_tokens = tokens;
  const CallOutcome outcome = CONF_CALL(ctx, Kv_Allocate, args);
  calrt::Kv adopted(args.kv, {ctx.api});
  if (out != nullptr) {
    *out = std::move(adopted);
  }
  return outcome;
}

void kv_accounting(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::configured);
  const calrt::KvCapacity before = f.calbin.kv_capacity();
  constexpr uint32_t kTokens = 32;
  calrt::Kv kv = calrt::Kv::allocate(f.calbin, kTokens);
  const calrt::KvInfo info = kv.info();
  require(info.capacity_tokens == kTokens && info.filled_tokens == 0,
          fmt::format("Kv_Info: capacity {} filled {}, expected {} and 0", info.capacity_tokens,
                      info.filled_tokens, kTokens));
  const calrt::KvCapacity during = f.calbin.kv_capacity();
  require(during.free_tokens + kTokens == before.free_tokens &&
              during.live_handles == before.live_handles + 1,
          fmt::format("Kv_Capacity after allocating {}: free {} -> {}, live {} -> {}", kTokens,
                      before.free_tokens, during.free_tokens, before.live_handles,
                      during.live_handles));
  kv.free();
  const calrt::KvCapacity after = f.calbin.kv_capacity();
  require(
      after.free_tokens == before.free_tokens && after.live_handles == before.live_handles,
      fmt::format("Kv_Capacity after Kv_Free: free {} live {}, expected {} and {}",
                  after.free_tokens, after.live_handles, before.free_tokens, before.live_handles));
}

void kv_bad_sizes(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::configured);
  expect_code(allocate(ctx, f, 0, nullptr), CALRT_INVALID_ARGUMENT, "Kv_Allocate(0)");
  expect_code(allocate(ctx, f, f.info.context + 1, nullptr), CALRT_OUT_OF_RANGE,
              "Kv_Allocate(context + 1)");
}

void kv_exhaustion(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::configured);
  const calrt::KvCapacity capacity = f.calbin.kv_capacity();
  const uint64_t bound = capacity.total_tokens / std::max<uint32_t>(f.info.context, 1) + 2;
  std::vector<calrt::Kv> live;
  uint64_t held = 0;
  for (uint64_t i = 0; i <= std::min<uint64_t>(bound, 256); ++i) {
    calrt::Kv kv;
    const CallOutcome outcome = allocate(ctx, f, f.info.context, &kv);
    if (!outcome.ok()) {
      expect_code(outcome, CALRT_KV_EXHAUSTED, "Kv_Allocate past the reservation");
      require(outcome.message.find_first_of("0123456789") != std::string::npos,
              "KV_EXHAUSTED message '" + outcome.message + "' gives no free token count");
      return;
    }
    held += f.info.context;
    require(held <= capacity.total_tokens,
            fmt::format("Kv_Allocate succeeded with {} tokens live, total_tokens is {}", held,
                        capacity.total_tokens));
    live.push_back(std::move(kv));
  }
  throw ClauseFailure(fmt::format("Kv_Allocate({}) never refused within {} allocations",
                                  f.info.context, live.size()));
}

void kv_overflow(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::buffers);
  const calrt::Kv kv = ctx.apply_kv(f, f.prefill, kJobTokens / 2);
  ctx.write_inputs(f.prefill, kJobTokens);
  calrt::Job job;
  const CallOutcome submitted =
      ctx.submit_raw(f, f.prefill.name(), f.prefill.input.get(), f.prefill.output.get(), &job);
  if (!submitted.ok()) {
    expect_code(submitted, CALRT_KV_EXHAUSTED, CALRT_OUT_OF_RANGE,
                "Job_Submit of more tokens than the KV holds");
    return;
  }
  require(job.wait(kClauseWait) == calrt::WaitResult::ready, "Job_Wait: NOT_READY");
  const calrt::JobStatus s = job.status();
  require(s.state == calrt::JobState::failed,
          fmt::format("a prefill of {} tokens on a KV of {} ended {}, expected FAILED", kJobTokens,
                      kJobTokens / 2, calrt::to_string(s.state)));
  expect_code(CallOutcome{s.code, s.message}, CALRT_KV_EXHAUSTED, CALRT_OUT_OF_RANGE,
              "the overflowing job's code");
}

void kv_fill_and_clear(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Job job = ctx.submit(f, f.prefill);
  require(job.wait(kClauseWait) == calrt::WaitResult::ready, "Job_Wait: NOT_READY");
  require(job.status().state == calrt::JobState::completed, "the prefill did not complete");
  const calrt::KvInfo filled = f.kv.info();
  require(filled.filled_tokens == kJobTokens,
          fmt::format("fill level {} after a prefill of {}", filled.filled_tokens, kJobTokens));
  f.kv.clear();
  const calrt::KvInfo cleared = f.kv.info();
  require(cleared.filled_tokens == 0 && cleared.capacity_tokens == filled.capacity_tokens,
          fmt::format("after Kv_Clear: fill {} capacity {}, expected 0 and {}",
                      cleared.filled_tokens, cleared.capacity_tokens, filled.capacity_tokens));
}

CallOutcome apply(ClauseContext& ctx, CalrtKv* kv, CalrtBuffer* buffer, uint32_t row = 0) {
  auto args = args_of<Calrt_Kv_Apply_Args>();
  args.kv = kv;
  args.input = buffer;
  args.row = row;
  return CONF_CALL(ctx, Kv_Apply, args);
}

// Rows (calrt.h, Kv_Apply): a prefill's input has row 0 only, a decode's the calbin's batch of
// rows. A row past them is refused, or a runtime that binds it to row 0 would decode another
// sequence's KV in a batch.
void kv_rows(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  expect_code(apply(ctx, f.kv.get(), f.prefill.input.get(), 1), CALRT_INVALID_ARGUMENT,
              "Kv_Apply to row 1 of a prefill's input");
  const std::vector<calrt::ModelDesc> models = f.calbin.models();
  if (std::none_of(models.begin(), models.end(),
                   [](const auto& m) { return m.type == calrt::ModelType::decode; })) {
    return;  // no decode model: no rows past row 0
  }
  ModelIo decode = ctx.model_io(f, calrt::ModelType::decode);
  const uint32_t batch = std::max<uint32_t>(f.info.batch, 1);
  expect_code(
      apply(ctx, f.kv.get(), decode.input.get(), batch), CALRT_INVALID_ARGUMENT,
      fmt::format("Kv_Apply to row {} of the decode input of a batch-{} calbin", batch, batch));
  expect_code(apply(ctx, f.kv.get(), decode.input.get(), UINT32_MAX), CALRT_INVALID_ARGUMENT,
              "Kv_Apply to row 2^32 - 1");
  const CallOutcome last = apply(ctx, f.kv.get(), decode.input.get(), batch - 1);
  require(last.ok(), fmt::format("Kv_Apply to the last row, {}, of the decode input: {} {}",
                                 batch - 1, calrt::code_name(last.code), last.message));
}

void kv_freed_and_busy(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  calrt::Kv other = ctx.apply_kv(f, f.prefill);
  CalrtKv* freed = other.get();
  other.free();
  expect_code(apply(ctx, freed, f.prefill.input.get()), CALRT_INVALID_HANDLE,
              "Kv_Apply of a freed KV");
  expect_code(ctx.submit_raw(f, f.prefill.name(), f.prefill.input.get(), f.prefill.output.get()),
              CALRT_WRONG_STATE, "Job_Submit with the buffer's KV freed");
  expect_code(apply(ctx, f.kv.get(), f.prefill.output.get()), CALRT_INVALID_ARGUMENT,
              "Kv_Apply to an output buffer");
  f.kv.apply(f.prefill.input);
  calrt::Job job = ctx.submit_held(f, f.prefill);
  auto free_args = args_of<Calrt_Kv_Free_Args>();
  free_args.kv = f.kv.get();
  expect_code(CONF_CALL(ctx, Kv_Free, free_args), CALRT_BUSY, "Kv_Free while a job uses it");
  auto clear = args_of<Calrt_Kv_Clear_Args>();
  clear.kv = f.kv.get();
  expect_code(CONF_CALL(ctx, Kv_Clear, clear), CALRT_BUSY, "Kv_Clear while a job uses it");
  require(!job.status().is_final(), "the held job became final during the checks");
  job.cancel();
}

// Every allocation is exactly what was asked for or refused; the capacity report counts every
// free token, fragmented or not. Handles of a quarter of the reservation (at most the
// context) after a small first one fill it up to a remainder that no further handle fits;
// freeing the first and the third then leaves the free room in pieces.
void kv_partial_and_fragmented(ClauseContext& ctx) {
  const Fixture f = ctx.fixture(Setup::configured);
  const uint64_t total = f.calbin.kv_capacity().total_tokens;
  const auto piece = static_cast<uint32_t>(std::min<uint64_t>(f.info.context, total / 4));
  require(piece > 2, fmt::format("a reservation of {} tokens is too small for this clause", total));
  const uint32_t first = (total - 1) % piece == 0 ? 2 : 1;  // leaves a non-zero remainder
  std::vector<std::pair<calrt::Kv, uint32_t>> live;
  uint64_t held = 0;
  auto checked_allocate = [&](uint32_t tokens, const char* what) -> CallOutcome {
    calrt::Kv kv;
    const CallOutcome outcome = allocate(ctx, f, tokens, &kv);
    if (!outcome.ok()) return outcome;
    const calrt::KvInfo info = kv.info();
    require(info.capacity_tokens == tokens,
            fmt::format("Kv_Allocate({}) ({}) succeeded with a capacity of {}: an allocation is "
                        "exactly what was asked for, or KV_EXHAUSTED",
                        tokens, what, info.capacity_tokens));
    held += tokens;
    live.emplace_back(std::move(kv), tokens);
    return outcome;
  };
  require(checked_allocate(first, "the first, small handle").ok(),
          fmt::format("Kv_Allocate({}) on an empty reservation of {} failed", first, total));
  for (int i = 0;; ++i) {
    require(i <= 8,
            fmt::format("Kv_Allocate({}) of a reservation of {} never refused", piece, total));
    const CallOutcome outcome = checked_allocate(piece, "filling the reservation");
    if (outcome.ok()) continue;
    expect_code(outcome, CALRT_KV_EXHAUSTED, "Kv_Allocate past the reservation");
    break;
  }
  auto check_capacity = [&](const char* when) {
    const calrt::KvCapacity now = f.calbin.kv_capacity();
    require(now.free_tokens == total - held,
            fmt::format("Kv_Capacity {}: free_tokens {}, but {} of {} tokens are held: free is "
                        "every free token, not the largest piece",
                        when, now.free_tokens, held, total));
    require(now.largest_free_tokens <= now.free_tokens,
            fmt::format("Kv_Capacity {}: largest_free_tokens {} exceeds free_tokens {}", when,
                        now.largest_free_tokens, now.free_tokens));
    return now;
  };
  const calrt::KvCapacity full = check_capacity("with the reservation full");
  require(full.largest_free_tokens < piece,
          fmt::format("Kv_Allocate({}) was refused, yet largest_free_tokens is {}", piece,
                      full.largest_free_tokens));
  require(live.size() >= 4, fmt::format("only {} handles fit", live.size()));
  held -= live[0].second + live[2].second;
  live[0].first.free();
  live[2].first.free();
  const calrt::KvCapacity holes = check_capacity("after freeing two handles apart");
  require(holes.largest_free_tokens >= piece,
          fmt::format("Kv_Capacity: largest_free_tokens {} after a handle of {} was freed",
                      holes.largest_free_tokens, piece));
  require(checked_allocate(piece, "into the freed handle's room").ok(),
          fmt::format("Kv_Allocate({}) refused with a freed room of {} tokens", piece, piece));
  check_capacity("after allocating into the freed room");
}

}  // namespace

std::vector<Clause> clauses_kv() {
  return {
      {"KV.1", "KV", "allocate, info and capacity", kv_accounting},
      {"KV.2", "KV", "bad sizes", kv_bad_sizes},
      {"KV.3", "KV", "exhaustion is an error", kv_exhaustion},
      {"KV.4", "KV", "overflow is never success", kv_overflow},
      {"KV.5", "KV", "fill level and clear", kv_fill_and_clear},
      {"KV.6", "KV", "freed and busy KV", kv_freed_and_busy},
      {"KV.7", "KV", "partial allocation and fragmentation", kv_partial_and_fragmented},
      {"KV.8", "KV", "rows of Kv_Apply", kv_rows},
  };
}

}  // namespace runner
