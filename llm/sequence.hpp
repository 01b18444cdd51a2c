// One request's sequence on the device (internal): it owns its KV handle (RAII, Kv_Free on
// destruction, counted in the ledger) and the bookkeeping of which tokens are in the KV.
//
// `history` holds every token whose KV is, or is to be, in the cache, in order: the prompt,
// then each generated token. `fed` of them are in the KV. The next job feeds
// history[fed, fed + count): prefill chunks of the prompt (the calbin's chunk, the last one
// shorter), then a one-token decode step per generated token. The job that feeds the last
// pending token gives the logits of the next one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "abi/calrt.hpp"
#include "llm/error.hpp"
#include "llm/ledger.hpp"

namespace calrt::llm {

class Sequence {
 public:
  // Kv_Allocate of `capacity_tokens`; runtime errors keep their class (KV_EXHAUSTED is the
  // request's kv_exhausted).
  static Result<Sequence> create(const calrt::Calbin& calbin, uint32_t capacity_tokens,
                                 std::vector<int32_t> prompt, LedgerPair ledger);
  Sequence(Sequence&& other) noexcept;
  Sequence& operator=(Sequence&&) = delete;
  Sequence(const Sequence&) = delete;
  ~Sequence();

  uint32_t capacity() const { return capacity_; }
  uint32_t fed() const { return fed_; }
  size_t length() const { return history_.size(); }
  uint32_t pending() const { return static_cast<uint32_t>(history_.size()) - fed_; }
  bool needs_prefill() const { return fed_ < prefill_end_; }
  // Tokens the next job feeds, at most `chunk` of them (1 for a decode step).
  std::span<const int32_t> next_tokens(uint32_t chunk) const;
  // Whether a job feeding `count` tokens ends at the last pending one (it gives logits).
  bool gives_logits(uint32_t count) const { return fed_ + count == history_.size(); }
  // Whether the next job fits the KV: every pending token's position is below capacity.
  bool fits() const { return history_.size() <= capacity_; }

  void advance(uint32_t count) { fed_ += count; }
  void append(int32_t token) { history_.push_back(token); }
  const calrt::Kv& kv() const { return kv_; }

  // Context shift: keep the first n_keep tokens, drop the oldest half of the others, clear
  // the KV (Kv_Clear) and start over from position 0: what is kept is prefilled again, since
  // the precompiled graphs cannot move KV entries. Throws calrt::Error from Kv_Clear.
  void shift(uint32_t n_keep);

 private:
  Sequence(calrt::Kv kv, uint32_t capacity, std::vector<int32_t> prompt, LedgerPair ledger);

  calrt::Kv kv_;
  uint32_t capacity_ = 0;
  std::vector<int32_t> history_;
  uint32_t fed_ = 0;
  uint32_t prefill_end_ = 0;  // history[0, prefill_end_) goes through the prefill model
  LedgerPair ledger_;
};

}  // namespace calrt::llm
