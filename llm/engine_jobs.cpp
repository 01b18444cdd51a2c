// The scheduler's job path: which work goes on a free slot, writing a job's inputs, and
// reading a finished job's rows into tokens.
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstring>

#include "llm/engine_impl.hpp"
#include "llm/host/tensor_io.hpp"

namespace calrt::llm {
namespace {

// A mapping counted in the request's and the engine's ledgers while it lives.
class CountedMap {
 public:
  CountedMap(calrt::Buffer& buffer, uint32_t tensor, calrt::Timeout timeout, LedgerPair ledger)
      : map_(buffer.map(tensor, timeout)), ledger_(ledger) {
    ledger_.add(&Ledger::buffers_mapped, 1);
  }
  ~CountedMap() { ledger_.add(&Ledger::buffers_mapped, -1); }
  CountedMap(const CountedMap&) = delete;
  CountedMap& operator=(const CountedMap&) = delete;
  const calrt::Mapping& operator*() const { return map_; }

 private:
  calrt::Mapping map_;
  LedgerPair ledger_;
};

std::chrono::nanoseconds span(std::chrono::nanoseconds from, std::chrono::nanoseconds to) {
  return to > from && from.count() > 0 ? to - from : std::chrono::nanoseconds{0};
}

// A request ready for its next job: admitted, not in flight, not cancelled.
bool ready(const Live& live) { return live.seq && !live.in_flight && !live.cancel; }

}  // namespace

// Each free slot gets one job. Decode steps and prefill chunks take turns, so a long prompt
// cannot starve the sequences already decoding, nor the reverse; within each, requests are
// taken round robin from the cursor, in admission order. A decode takes up to n_batch
// requests, one per row, rows 0.. in that order (continuous batching: who is in the batch is
// decided anew at every step).
void Engine::Impl::fill() {
  for (uint32_t slot = 0; slot < slots.size(); ++slot) {
    const bool busy = std::any_of(flights.begin(), flights.end(),
                                  [&](const Flight& f) { return f.slot == slot; });
    if (busy || active.empty()) continue;
    std::vector<Live*> decodes;
    Live* prefill = nullptr;
    for (size_t i = 0; i < active.size(); ++i) {
      Live& live = *active[(cursor + i) % active.size()];
      if (!ready(live) || live.id == 0) continue;
      if (live.seq->needs_prefill()) {
        if (prefill == nullptr) prefill = &live;
      } else if (decodes.size() < contract.caps.n_batch) {
        decodes.push_back(&live);
      }
    }
    if (prefill == nullptr && decodes.empty()) return;
    const bool decode = !decodes.empty() && (decode_turn || prefill == nullptr);
    decode_turn = !decode;
    cursor = (cursor + 1) % active.size();
    if (decode ? !submit_decode(slot, std::move(decodes)) : !submit_prefill(slot, *prefill)) {
      return;  // a fault was handled; the slots may have changed
    }
  }
}

// A context shift when the next token would not fit, if the request opted in.
static bool make_room(Live& live) {
  Sequence& seq = *live.seq;
  if (seq.fits()) return true;
  seq.shift(live.request.context_shift->n_keep);
  ++live.shifts;
  return seq.fits();
}

bool Engine::Impl::submit_prefill(uint32_t slot, Live& live) {
  Slot& io = slots[slot];
  const ModelBinding& m = contract.prefill;
  try {
    if (!make_room(live)) {
      finish(live, request_error(ErrorCode::context_exceeded, "context shift left no room"));
      return true;
    }
    Sequence& seq = *live.seq;
    const std::span<const int32_t> tokens = seq.next_tokens(contract.caps.prefill_chunk);
    std::vector<int32_t> positions(tokens.size());
    for (size_t t = 0; t < tokens.size(); ++t) positions[t] = static_cast<int32_t>(seq.fed() + t);
    seq.kv().apply(io.prefill_in);
    {
      const CountedMap map(io.prefill_in, m.token_input, config.call_timeout, ledger_of(live));
      write_row_i32((*map).bytes(), m.token(), tokens);
    }
    {
      const CountedMap map(io.prefill_in, m.position_input, config.call_timeout, ledger_of(live));
      write_row_i32((*map).bytes(), m.position(), positions);
    }
    io.prefill_in.set_csr(m.cur_seq_len_csr, tokens.size());
    io.prefill_in.set_csr(m.past_kv_csr, seq.fed());
    Flight flight{slot, true, static_cast<uint32_t>(tokens.size()), {&live}, {}, {}};
    flight.job = calrt::Job::submit(calbin, m.name(), io.prefill_in, io.prefill_out);
    flights.push_back(std::move(flight));
  } catch (const calrt::Error& error) {
    fail_rows({&live}, classify(error, fmt::format("prefill of request {}", live.id)));
    return false;
  }
  if (!live.first_job) {
    live.first_job = SteadyClock::now();
    live.timing.queue = *live.first_job - live.submitted;
  }
  live.in_flight = true;
  ++live.timing.prefill_jobs;
  ledger_of(live).add(&Ledger::jobs_in_flight, 1);
  ++stats.jobs;
  return true;
}

bool Engine::Impl::submit_decode(uint32_t slot, std::vector<Live*> rows) {
  Slot& io = slots[slot];
  const ModelBinding& m = contract.decode;
  std::vector<int32_t> tokens, positions;
  try {
    std::erase_if(rows, [&](Live* live) {
      if (make_room(*live)) return false;
      finish(*live, request_error(ErrorCode::context_exceeded, "context shift left no room"));
      return true;
    });
    if (rows.empty()) return true;
    for (size_t r = 0; r < rows.size(); ++r) {
      Sequence& seq = *rows[r]->seq;
      if (seq.needs_prefill()) {
        return submit_prefill(slot, *rows[r]);  // a shift emptied its KV: prefill again
      }
      seq.kv().apply(io.decode_in, static_cast<uint32_t>(r));
      tokens.push_back(seq.next_tokens(1).front());
      positions.push_back(static_cast<int32_t>(seq.fed()));
    }
    {
      const CountedMap map(io.decode_in, m.token_input, config.call_timeout, ledger_of(*rows[0]));
      write_column_i32((*map).bytes(), m.token(), tokens);
    }
    {
      const CountedMap map(io.decode_in, m.position_input, config.call_timeout,
                           ledger_of(*rows[0]));
      write_column_i32((*map).bytes(), m.position(), positions);
    }
    // Rows past the live ones are idle: cur_seq_len counts the live rows, and the device
    // computes only those (calrt.h, Kv_Apply). A batch decode takes each row's past from its
    // position and does not read past_kv_cur_seq_len; a batch-1 decode reads it.
    io.decode_in.set_csr(m.cur_seq_len_csr, rows.size());
    io.decode_in.set_csr(m.past_kv_csr, contract.caps.n_batch == 1 ? positions.front() : 0);
    Flight flight{slot, false, 1, rows, {}, {}};
    flight.job = calrt::Job::submit(calbin, m.name(), io.decode_in, io.decode_out);
    flights.push_back(std::move(flight));
  } catch (const calrt::Error& error) {
    fail_rows(rows, classify(error, fmt::format("decode step of {} rows", rows.size())));
    return false;
  }
  for (Live* live : rows) {
    live->in_flight = true;
    ++live->timing.decode_jobs;
    ledger_of(*live).add(&Ledger::jobs_in_flight, 1);
  }
  ++stats.jobs;
  return true;
}

// A batch step's device time counts for each of its rows.
void Engine::Impl::add_device_time(const Flight& flight, const calrt::JobStatus& status) {
  for (Live* live : flight.rows) {
    live->timing.h2d += span(status.submit_time, status.h2d_end_time);
    live->timing.infer += span(status.compute_start_time, status.compute_end_time);
    live->timing.d2h += span(status.compute_end_time, status.end_time);
  }
}

void Engine::Impl::fail_oldest(const Error& error) {
  if (error.kind != ErrorKind::request) {
    fail_rows({}, error);  // the model's or the device's: every request is answered
    return;
  }
  const std::vector<Live*> rows = flights.front().rows;
  pop_oldest();
  fail_rows(rows, error);
}

bool Engine::Impl::complete_oldest(std::chrono::nanoseconds budget) {
  Flight& flight = flights.front();
  const std::chrono::nanoseconds job_left = config.job_timeout - flight.waited;
  const std::chrono::nanoseconds wait = std::min(budget, job_left);
  calrt::JobStatus status;
  try {
    if (flight.job.wait(wait) == calrt::WaitResult::not_ready) {
      flight.waited += wait;
      if (flight.waited < config.job_timeout) return false;  // the caller's budget ran out
      flight.job.cancel();
      device_fault(device_error(
          fmt::format("a {} job did not finish within {} ms", flight.prefill ? "prefill" : "decode",
                      config.job_timeout.count()),
          CALRT_DEVICE_HUNG));
      return true;
    }
    status = flight.job.status();
  } catch (const calrt::Error& error) {
    device_fault(classify(error, "waiting for a job"));
    return true;
  }
  add_device_time(flight, status);
  if (status.state != calrt::JobState::completed) {
    fail_oldest(from_runtime_code(status.code, status.message,
                                  fmt::format("{} job {}", flight.prefill ? "prefill" : "decode",
                                              calrt::to_string(status.state))));
    return true;
  }
  Slot& io = slots[flight.slot];
  const ModelBinding& model = flight.prefill ? contract.prefill : contract.decode;
  calrt::Buffer& output = flight.prefill ? io.prefill_out : io.decode_out;
  try {
    for (uint32_t r = 0; r < flight.rows.size(); ++r) {
      Live& live = *flight.rows[r];
      const bool gives = live.seq->gives_logits(flight.count);
      live.seq->advance(flight.count);
      if (gives && !live.cancel) emit(live, flight, r, output, model);
    }
  } catch (const calrt::Error& error) {
    fail_oldest(classify(error, "reading a job's output"));
    return true;
  }
  const std::vector<Live*> rows = flight.rows;
  pop_oldest();  // Job_Destroy: the slot's buffers are free again
  for (Live* live : rows) {
    if (live->cancel) {
      finish(*live, request_error(ErrorCode::cancelled, fmt::format("cancelled after {} tokens",
                                                                    live->generated.size())));
    } else if (live->generated.size() >= live->request.max_new_tokens) {
      finish(*live, std::nullopt);
    }
  }
  return true;
}

// The device ranked: greedy is its first id; sampling draws from its first k.
int32_t Engine::Impl::pick_ranked(Live& live, uint32_t row, calrt::Buffer& output,
                                  const ModelBinding& model, uint64_t stream, TokenEvent& event) {
  const Request& r = live.request;
  const auto begin = SteadyClock::now();
  const size_t k = model.top_k;
  std::vector<int32_t> ids(k);
  {
    const CountedMap map(output, model.top_ids_output, config.call_timeout, ledger_of(live));
    std::memcpy(ids.data(), (*map).bytes().data() + row * k * sizeof(int32_t), k * sizeof(int32_t));
  }
  std::vector<float> values(k);
  {
    const CountedMap map(output, model.top_logits_output, config.call_timeout, ledger_of(live));
    read_row_f32_into((*map).bytes(), model.top_logits(), row, values);
  }
  const bool greedy = r.sampling.method == SamplingMethod::greedy;
  const size_t first = greedy ? 1 : std::min<size_t>(r.sampling.top_k, k);
  const int32_t token = ids[draw_candidate(std::span<const float>(values).first(first),
                                           r.sampling.temperature, stream, r.sampling.top_p)];
  live.timing.sample += SteadyClock::now() - begin;
  if (r.want_logits) {
    event.logits = std::move(values);
    event.top_ids = std::move(ids);
  }
  return token;
}

// A full row: greedy without want_logits ranks straight from the BF16 row (no FP32 row is
// written); otherwise the row is converted once, ranked while it is converted, then drawn from.
int32_t Engine::Impl::pick_full(Live& live, uint32_t row, calrt::Buffer& output,
                                const ModelBinding& model, uint64_t stream, TokenEvent& event) {
  const Request& r = live.request;
  const bool greedy = r.sampling.method == SamplingMethod::greedy;
  const CountedMap map(output, model.logits_output, config.call_timeout, ledger_of(live));
  RowPick pick;
  std::vector<float> logits;
  if (greedy && !r.want_logits) {
    const auto begin = SteadyClock::now();
    pick = rank_row((*map).bytes(), model.logits(), row, 1);
    live.timing.sample += SteadyClock::now() - begin;
  } else {
    const size_t k = greedy ? 1 : std::clamp<size_t>(r.sampling.top_k, 1, contract.caps.vocab);
    const auto begin = SteadyClock::now();
    logits.resize(contract.caps.vocab);
    pick = read_row_pick((*map).bytes(), model.logits(), row, logits, k);
    live.timing.convert += SteadyClock::now() - begin;
  }
  const auto begin = SteadyClock::now();
  int32_t token = pick.argmax;
  if (!greedy) {
    std::vector<float> ranked;
    for (const int32_t id : pick.top_k) ranked.push_back(logits[static_cast<size_t>(id)]);
    token = pick.top_k[draw_candidate(ranked, r.sampling.temperature, stream, r.sampling.top_p)];
  }
  live.timing.sample += SteadyClock::now() - begin;
  if (r.want_logits) event.logits = std::move(logits);
  return token;
}

void Engine::Impl::emit(Live& live, Flight& flight, uint32_t row, calrt::Buffer& output,
                        const ModelBinding& model) {
  const uint32_t step = static_cast<uint32_t>(live.generated.size());
  // The stream depends on the request's seed and the step alone: the same tokens whoever
  // shares the device.
  const uint64_t stream = derive_stream(live.request.sampling.seed, {step});
  TokenEvent event;
  event.id = live.id;
  event.step = step;
  event.row = row;
  event.slot = flight.slot;
  event.token = model.ranked() ? pick_ranked(live, row, output, model, stream, event)
                               : pick_full(live, row, output, model, stream, event);
  const auto now = SteadyClock::now();
  if (!live.first_token) {
    live.first_token = now;
    live.timing.ttft = now - live.submitted;
  }
  live.last_token = now;
  event.since_submit = now - live.submitted;
  live.generated.push_back(event.token);
  live.seq->append(event.token);
  if (events != nullptr) events->push_back(std::move(event));
}

}  // namespace calrt::llm
