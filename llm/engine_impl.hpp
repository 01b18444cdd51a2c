// The engine's state (internal). Members are declared in creation order so that they are
// destroyed children first: jobs, then sequences (KV), buffers, the calbin, the device.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_set>
#include <vector>

#include "calbin/acceptance/service_manifest.hpp"
#include "calbin/manifest.hpp"
#include "llm/contract.hpp"
#include "llm/engine.hpp"
#include "llm/sequence.hpp"

namespace calrt::llm {

using SteadyClock = std::chrono::steady_clock;

// A request from submit() to its Outcome.
struct Live {
  RequestId id = 0;
  Request request;
  SteadyClock::time_point submitted;
  std::optional<SteadyClock::time_point> first_job;
  std::optional<SteadyClock::time_point> first_token;
  SteadyClock::time_point last_token;
  Ledger ledger;
  RequestTiming timing;
  std::vector<int32_t> generated;
  uint32_t shifts = 0;
  bool cancel = false;
  bool in_flight = false;
  std::optional<Sequence> seq;  // admitted: its KV is allocated
};

// One ping/pong slot's buffers: the input and output of both models. A job in flight on the
// slot owns all four until it is final and its output was read.
struct Slot {
  calrt::Buffer prefill_in;
  calrt::Buffer prefill_out;
  calrt::Buffer decode_in;
  calrt::Buffer decode_out;
};

// One job in flight: a prefill chunk of one request, or a decode step of one request per row.
struct Flight {
  uint32_t slot = 0;
  bool prefill = false;
  uint32_t count = 0;       // tokens a prefill chunk feeds (1 per row for a decode)
  std::vector<Live*> rows;  // row r is rows[r]; a prefill has one
  std::chrono::nanoseconds waited{0};
  calrt::Job job;
};

struct Engine::Impl {
  EngineConfig config;
  calbin::Manifest manifest;
  calbin::ServiceManifest service;
  std::string service_file;  // as named in messages
  calrt::Device device;
  calrt::Calbin calbin;
  Contract contract;
  std::vector<Slot> slots;
  EngineStats stats;  // its ledger is the engine's
  // submit() and cancel() come from any thread; poll() takes from here under the lock.
  mutable std::mutex mutex;
  std::deque<std::unique_ptr<Live>> queue;
  std::unordered_set<RequestId> cancels;
  std::unordered_set<RequestId> live_ids;  // submitted, no Outcome yet
  Capabilities caps;  // contract.caps as submit() sees it: the polling thread reloads contract
  RequestId next_id = 1;
  bool model_available = true;
  std::optional<Error> down;  // the device could not be brought back
  // The polling thread's own.
  std::vector<std::unique_ptr<Live>> active;  // admitted, first come first
  std::deque<Flight> flights;                 // oldest first
  size_t cursor = 0;                          // round robin over `active`
  bool decode_turn = false;
  std::vector<Event>* events = nullptr;

  // engine.cpp
  Result<void> read_inputs();  // the calbin's manifest and the service manifest
  Result<void> load();         // calbin, contract, configure, capabilities, slots
  void take_queue_updates();
  void admit();
  void finish(Live& live, std::optional<Error> error);
  void remove_finished();
  LedgerPair ledger_of(Live& live) { return {&live.ledger, &stats.ledger}; }
  // engine_jobs.cpp
  void fill();
  bool submit_prefill(uint32_t slot, Live& live);
  bool submit_decode(uint32_t slot, std::vector<Live*> rows);
  // Waits for the oldest job at most `budget`; false when it is still running.
  bool complete_oldest(std::chrono::nanoseconds budget);
  void add_device_time(const Flight& flight, const calrt::JobStatus& status);
  // The oldest job failed: a request fault ends its rows, others go to model_fault() or
  // device_fault().
  void fail_oldest(const Error& error);
  void emit(Live& live, Flight& flight, uint32_t row, calrt::Buffer& output,
            const ModelBinding& model);
  // The token of one row: ranked on the device, or ranked/sampled from the full row.
  int32_t pick_ranked(Live& live, uint32_t row, calrt::Buffer& output, const ModelBinding& model,
                      uint64_t stream, TokenEvent& event);
  int32_t pick_full(Live& live, uint32_t row, calrt::Buffer& output, const ModelBinding& model,
                    uint64_t stream, TokenEvent& event);
  // engine_faults.cpp
  // A runtime error of a call the engine made, classified: a request-class code the device
  // gave because it is FAULTED or LOST (WRONG_STATE) is the device's fault, not the request's.
  Error classify(const calrt::Error& error, std::string_view where) const;
  Error reclassify(Error mapped) const;
  void fail_rows(const std::vector<Live*>& rows, const Error& error);
  void model_fault(const Error& error);
  void device_fault(const Error& error);
  void release_flights();
  void pop_oldest();  // destroys the oldest job; its rows are no longer in flight
  bool recover();
};

}  // namespace calrt::llm
