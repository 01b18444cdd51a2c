#include "llm/sequence.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cassert>

namespace calrt::llm {

Result<Sequence> Sequence::create(const calrt::Calbin& calbin, uint32_t capacity_tokens,
                                  std::vector<int32_t> prompt, LedgerPair ledger) {
  try {
    calrt::Kv kv = calrt::Kv::allocate(calbin, capacity_tokens);
    return Sequence(std::move(kv), capacity_tokens, std::move(prompt), ledger);
  } catch (const calrt::Error& error) {
    return tl::unexpected(from_runtime(error, fmt::format("KV for {} tokens", capacity_tokens)));
  }
}

Sequence::Sequence(calrt::Kv kv, uint32_t capacity, std::vector<int32_t> prompt, LedgerPair ledger)
    : kv_(std::move(kv)),
      capacity_(capacity),
      history_(std::move(prompt)),
      prefill_end_(static_cast<uint32_t>(history_.size())),
      ledger_(ledger) {
  ledger_.add(&Ledger::kv_handles, 1);
  ledger_.add(&Ledger::kv_tokens, capacity_);
}

Sequence::Sequence(Sequence&& other) noexcept
    : kv_(std::move(other.kv_)),
      capacity_(other.capacity_),
      history_(std::move(other.history_)),
      fed_(other.fed_),
      prefill_end_(other.prefill_end_),
      ledger_(other.ledger_) {
  other.ledger_ = {};  // the moved-from sequence holds nothing to return
}

Sequence::~Sequence() {
  if (!kv_) return;
  // Kv_Free through the owner, which discards a runtime error: after a device fault the
  // handle may already be gone with the device's state, and the count must still return.
  kv_ = calrt::Kv();
  ledger_.add(&Ledger::kv_handles, -1);
  ledger_.add(&Ledger::kv_tokens, -int64_t{capacity_});
}

std::span<const int32_t> Sequence::next_tokens(uint32_t chunk) const {
  assert(pending() > 0);
  const uint32_t count = needs_prefill() ? std::min(chunk, prefill_end_ - fed_) : 1u;
  return std::span<const int32_t>(history_).subspan(fed_, count);
}

void Sequence::shift(uint32_t n_keep) {
  const size_t keep = std::min<size_t>(n_keep, history_.size());
  const size_t discard = (history_.size() - keep) / 2;
  history_.erase(history_.begin() + static_cast<std::ptrdiff_t>(keep),
                 history_.begin() + static_cast<std::ptrdiff_t>(keep + discard));
  kv_.clear();
  fed_ = 0;
  prefill_end_ = static_cast<uint32_t>(history_.size());  // all of it is prefilled again
}

}  // namespace calrt::llm
