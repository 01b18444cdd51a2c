// The resource ledger: what a request, or the whole engine, holds on the device right now.
// Counted where the resource is taken and returned (sequence.cpp, engine_jobs.cpp), so a
// leak shows as a non-zero count once every request has ended.
#pragma once

#include <cstdint>
#include <string>

namespace calrt::llm {

struct Ledger {
  int64_t buffers_mapped = 0;  // Buffer_Map without its Buffer_Unmap yet
  int64_t kv_handles = 0;      // Kv_Allocate without Kv_Free yet
  int64_t kv_tokens = 0;       // KV capacity those handles hold
  int64_t jobs_in_flight = 0;  // Job_Submit whose job is not destroyed yet

  bool zero() const {
    return buffers_mapped == 0 && kv_handles == 0 && kv_tokens == 0 && jobs_in_flight == 0;
  }
  std::string to_string() const {
    return "buffers_mapped " + std::to_string(buffers_mapped) + ", kv_handles " +
           std::to_string(kv_handles) + ", kv_tokens " + std::to_string(kv_tokens) +
           ", jobs_in_flight " + std::to_string(jobs_in_flight);
  }
};

// A count taken by one request: kept in the request's ledger and in the engine's.
struct LedgerPair {
  Ledger* request = nullptr;
  Ledger* engine = nullptr;

  template <class Field>
  void add(Field field, int64_t delta) const {
    if (request != nullptr) request->*field += delta;
    if (engine != nullptr) engine->*field += delta;
  }
};

}  // namespace calrt::llm
