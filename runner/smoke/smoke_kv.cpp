// Smoke step 8: KV capacity exhaustion and release. The cases already exercised allocate,
// apply, clear and free; here the reservation is filled until the runtime answers
// KV_EXHAUSTED (a request-class fault), emptied again, and checked to be whole; a double
// free must be rejected with INVALID_HANDLE.
#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "runner/core/session.hpp"

namespace runner {
namespace {

// Allocation attempts are bounded: a runtime that never reports exhaustion fails the
// step instead of looping.
constexpr uint64_t kMaxAllocations = 4096;

struct Exhaustion {
  uint32_t tokens_per_handle = 0;
  size_t allocated = 0;
  bool exhausted = false;
};

Exhaustion exhaust(Session& s, const calrt::KvCapacity& before, StepResult& step) {
  Exhaustion out;
  uint64_t size = std::min<uint64_t>(s.info.context, before.largest_free_tokens);
  // Keep the loop within its bound even for a reservation of many contexts.
  size = std::max(size, (before.free_tokens + kMaxAllocations - 3) / (kMaxAllocations - 2));
  out.tokens_per_handle = static_cast<uint32_t>(std::min<uint64_t>(size, s.info.context));
  if (out.tokens_per_handle == 0) {
    step.fail("Kv_Capacity reports no free room before the KV checks");
    return out;
  }
  std::vector<calrt::Kv> held;  // freed explicitly below, or by RAII on an exception
  const uint64_t bound = std::min(kMaxAllocations, before.free_tokens / out.tokens_per_handle + 2);
  for (uint64_t i = 0; i < bound && !out.exhausted; ++i) {
    try {
      held.push_back(calrt::Kv::allocate(s.calbin, out.tokens_per_handle));
    } catch (const calrt::Error& error) {
      if (error.code() != CALRT_KV_EXHAUSTED || error.fault_class() != calrt::FaultClass::request) {
        step.fail(fmt::format("allocation {} of {} tokens: expected KV_EXHAUSTED (request), got {}",
                              i + 1, out.tokens_per_handle, error.what()));
        break;
      }
      out.exhausted = true;
      step.details["exhausted_message"] = error.message();
    }
  }
  out.allocated = held.size();
  if (!out.exhausted && step.passed()) {
    step.fail(fmt::format("no KV_EXHAUSTED after {} allocations of {} tokens (capacity {} tokens)",
                          held.size(), out.tokens_per_handle, before.total_tokens));
  }
  for (calrt::Kv& kv : held) {
    kv.free();
  }
  return out;
}

void check_restored(const calrt::KvCapacity& before, const calrt::KvCapacity& after,
                    StepResult& step) {
  if (after.free_tokens != before.free_tokens || after.live_handles != before.live_handles ||
      after.largest_free_tokens != before.largest_free_tokens) {
    step.fail(fmt::format(
        "capacity not restored after freeing: free {} (was {}), largest {} (was {}), live "
        "handles {} (was {})",
        after.free_tokens, before.free_tokens, after.largest_free_tokens,
        before.largest_free_tokens, after.live_handles, before.live_handles));
  }
}

void check_double_free(Session& s, StepResult& step) {
  calrt::Kv kv = calrt::Kv::allocate(s.calbin, 1);
  CalrtKv* raw = kv.release();
  s.api.kv_free_raw(raw);
  try {
    s.api.kv_free_raw(raw);
    step.fail("a second Kv_Free of the same handle succeeded; expected INVALID_HANDLE");
  } catch (const calrt::Error& error) {
    if (error.code() != CALRT_INVALID_HANDLE) {
      step.fail(fmt::format("double free: expected INVALID_HANDLE, got {}", error.what()));
    }
  }
}

}  // namespace

StepResult step_kv(Session& s) {
  return run_guarded(8, "kv", [&](StepResult& step) {
    const calrt::KvCapacity before = s.calbin.kv_capacity();
    if (before.live_handles != 0) {
      step.fail(fmt::format("{} KV handles alive before the KV checks: the cases leaked them",
                            before.live_handles));
    }
    const Exhaustion exhaustion = exhaust(s, before, step);
    const calrt::KvCapacity after = s.calbin.kv_capacity();
    check_restored(before, after, step);
    check_double_free(s, step);
    check_restored(before, s.calbin.kv_capacity(), step);
    step.summary = fmt::format(
        "allocate/apply/clear/free exercised by {}; capacity {} tokens ({} B/token/chip); "
        "{} x {} tokens then {}; capacity {}; double free {}",
        count_of(s.inputs.case_indices.size(), "case"), before.total_tokens,
        before.bytes_per_token_per_chip, exhaustion.allocated, exhaustion.tokens_per_handle,
        exhaustion.exhausted ? "KV_EXHAUSTED (request)" : "no exhaustion",
        step.passed() ? "restored" : "checked", step.passed() ? "-> INVALID_HANDLE" : "checked");
    step.details.update({{"total_tokens", before.total_tokens},
                         {"free_tokens_before", before.free_tokens},
                         {"free_tokens_after", after.free_tokens},
                         {"tokens_per_handle", exhaustion.tokens_per_handle},
                         {"allocated_until_exhausted", exhaustion.allocated},
                         {"exhausted", exhaustion.exhausted}});
  });
}

}  // namespace runner
