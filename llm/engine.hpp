// calrt::llm::Engine: the strict LLM adapter over the CalRT ABI (calrt.hpp). One engine
// serves one calbin on one device for many requests (llm/README.md has the whole model).
//
//   auto engine = Engine::open(config);             // contract check, configure, buffers
//   auto id = engine->submit(request);              // any thread; queued, first come first served
//   engine->poll(10ms, events);                     // the caller's thread drives the device
//   ... TokenEvent per token, one Outcome per request ...
//
// The engine never throws out of its API and never aborts: runtime errors become an Error
// in the request's Outcome (request faults end that request, model faults stop the calbin,
// device faults answer every admitted request with a retryable error, reset the device and
// reopen it). Every wait is bounded.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "abi/calrt.hpp"
#include "llm/error.hpp"
#include "llm/ledger.hpp"
#include "llm/request.hpp"

namespace calrt::llm {

// Where the device comes from. The engine opens it itself (Device_Create), so that it can
// open it again after the device was lost.
struct DeviceSource {
  calrt::Api api;
  calrt::DeviceKind kind = calrt::DeviceKind::sim;
  uint32_t index = 0;
  std::string config;  // Device_Create's option string
};

struct EngineConfig {
  DeviceSource device;
  std::filesystem::path calbin;            // the calbin directory
  std::filesystem::path service_manifest;  // the versioned service manifest (YAML)
  // Bounds. Every wait is bounded by one of these; none is infinite.
  uint32_t queue_capacity = 64;                  // submitted, not yet admitted
  uint32_t max_sequences = 16;                   // admitted at once (a batch-B calbin: at most B)
  std::chrono::milliseconds job_timeout{10000};  // a job not final by then is a device fault
  std::chrono::milliseconds call_timeout{5000};  // Calbin_Create, Configure, Buffer_Map
  // The service's own limit on a sequence (its slot's context, llama.cpp's --ctx-size); 0
  // for none. n_ctx never exceeds it.
  uint32_t slot_context = 0;
  // Batch 1: two jobs in flight on the ping/pong slots (Device_SetParallelMode). Off: one.
  bool parallel = true;
};

// What the calbin offers, from the contract check.
struct Capabilities {
  // min(calbin_context, kv_tokens_per_sequence, tokenizer_context, slot_context)
  uint32_t n_ctx = 0;
  uint32_t n_batch = 0;  // the calbin's batch: decode rows per submission
  uint32_t vocab = 0;
  uint32_t prefill_chunk = 0;
  uint32_t calbin_context = 0;
  uint32_t kv_tokens_per_sequence = 0;  // Kv_Capacity: the largest one handle can hold
  uint32_t tokenizer_context = 0;       // 0 when the calbin does not say
  uint32_t slot_context = 0;            // EngineConfig::slot_context; 0 for none
  uint32_t decode_top_k = 0;            // > 0: the decode ranks on the device and gives K ids
};

struct EngineStats {
  Ledger ledger;              // engine-wide: the sum of the live requests' ledgers
  int64_t buffers_alive = 0;  // the engine's own slot buffers (created at open and reopen)
  // The runtime's own count of live KV handles of the calbin (Kv_Capacity), against which
  // the ledger's kv_handles can be checked; -1 when the runtime cannot say.
  int64_t device_kv_handles = -1;
  uint64_t submitted = 0;
  uint64_t completed = 0;
  uint64_t failed = 0;
  uint64_t cancelled = 0;
  uint64_t jobs = 0;
  uint64_t device_faults = 0;
  uint64_t recoveries = 0;  // device faults after which the engine was back in service
  uint64_t queued = 0;      // now
  uint64_t active = 0;      // now: admitted, not ended
  bool model_available = true;
};

class Engine {
 public:
  // Opens the device, loads the calbin, runs the start-up contract check against the
  // service manifest, configures the calbin and creates the slot buffers. A bad path or
  // manifest is a request-kind invalid_request naming the file; a contract mismatch is a
  // model_mismatch naming both sides; a runtime failure keeps its class.
  static Result<std::unique_ptr<Engine>> open(EngineConfig config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const Capabilities& capabilities() const;

  // Queues a request (thread-safe). Refused at once, with no Outcome to follow, when it is
  // malformed, cannot fit n_ctx (context_exceeded), the queue is full or the model is
  // unavailable. An accepted request gets exactly one Outcome from poll().
  Result<RequestId> submit(Request request);
  // Asks a request to stop (thread-safe): a queued one ends at the next poll(); an admitted
  // one at its next job boundary, with its KV and buffers released. False when the id is not
  // live (unknown, or already ended).
  bool cancel(RequestId id);

  // Drives the device on the caller's thread for at most `timeout`: admits queued requests,
  // submits jobs, waits for them (bounded), and appends TokenEvents and Outcomes to `events`
  // in the order they happened. Returns as soon as it appended events, or once nothing is
  // left to do. One thread polls; stats() and idle() are for that thread too.
  void poll(std::chrono::nanoseconds timeout, std::vector<Event>& events);
  // poll() until no request is queued or admitted, or `timeout` passed; true when idle.
  bool run_until_idle(std::chrono::nanoseconds timeout, std::vector<Event>& events);
  bool idle() const;

  EngineStats stats() const;

  // The device the engine drives, for the runtime's extensions (calrt_ext.hpp: fault
  // injection, trace, diagnostics). Do not reset or destroy anything through it; after a
  // device loss it is another device.
  const calrt::Device& device() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Runs one request alone to its end on `engine` (submit, then poll until its Outcome):
// the reference a run under load is compared with. Events of other requests are dropped.
Outcome run_alone(Engine& engine, Request request, std::chrono::nanoseconds timeout,
                  std::vector<TokenEvent>* tokens = nullptr);

}  // namespace calrt::llm
