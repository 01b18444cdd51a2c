#include "runner/bench/bench_engine.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>

#include "runner/core/decode_row.hpp"
#include "runner/core/sampling.hpp"
#include "runner/core/tensor_io.hpp"

namespace runner {
namespace {

// The bench's fingerprint of what the device stored, fed piece by piece (XXH3 streaming).
class Fingerprint {
 public:
  Fingerprint() : state_(XXH3_createState()) { XXH3_64bits_reset(state_.get()); }
  void add(std::span<const std::byte> bytes) {
    XXH3_64bits_update(state_.get(), bytes.data(), bytes.size());
  }
  uint64_t digest() const { return XXH3_64bits_digest(state_.get()); }

 private:
  struct Free {
    void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
  };
  std::unique_ptr<XXH3_state_t, Free> state_;
};

}  // namespace

std::vector<int32_t> bench_prompt(uint64_t seed, const RunKey& run, uint32_t seq, uint32_t length,
                                  uint32_t vocab) {
  SplitMix64 draw(derive_stream(seed, {run.warmup ? 1u : 0u, run.run, seq}));
  std::vector<int32_t> tokens(length);
  for (int32_t& token : tokens) {
    token = static_cast<int32_t>(draw.below(vocab));
  }
  return tokens;
}

uint64_t logits_fingerprint(std::span<const float> logits) {
  return XXH3_64bits(logits.data(), logits.size_bytes());
}

// One slot's buffers: input and output of both models (slot 0 is ping, 1 is pong).
struct BenchEngine::Slot {
  calrt::Buffer prefill_in;
  calrt::Buffer prefill_out;
  calrt::Buffer decode_in;
  calrt::Buffer decode_out;
};

// One request of a run: its prompt, its KV handle and how far it got.
struct BenchEngine::Request {
  uint32_t index = 0;
  std::vector<int32_t> prompt;
  calrt::Kv* kv = nullptr;
  uint32_t fed = 0;      // tokens in its KV
  uint32_t chunks = 0;   // prefill jobs submitted
  uint32_t decodes = 0;  // decode jobs submitted
  SequenceRecord record;
};

struct BenchEngine::InFlight {
  calrt::Job job;
  size_t request = 0;
  size_t record = 0;  // index into ModeRecord::jobs
};

struct BenchEngine::RunState {
  RunKey key;
  ModeRecord& mode;
  std::vector<Slot>& slots;
  std::vector<Request> requests;
  std::deque<size_t> ready;  // requests whose next job can be submitted, in turn order
  size_t remaining = 0;      // requests not done yet
};

namespace {

std::string where(const ModeRecord& mode, const JobRecord& job) {
  return fmt::format("{} {} request {} {} {} {} (submission #{}, slot {})", mode.mode,
                     job.run.label(), job.seq, to_string(job.kind),
                     job.kind == JobKind::prefill ? "chunk" : "step", job.index, job.submission,
                     job.slot);
}

}  // namespace

BenchEngine::BenchEngine(BenchSession& session, HostTime& host, DeviceTraceCollector& trace)
    : s_(session), host_(host), trace_(trace) {}

void BenchEngine::run_mode(bool parallel, ModeRecord& mode) {
  mode.mode = parallel ? "parallel" : "sync";
  mode.slots = parallel ? 2 : 1;
  const BenchOptions& o = s_.options;
  std::vector<Slot> slots;
  std::vector<calrt::Kv> kvs;
  try {
    if (parallel) {
      s_.device.set_parallel_mode(true);
    }
    for (uint32_t slot = 0; slot < mode.slots; ++slot) {
      Slot& io = slots.emplace_back();
      io.prefill_in =
          calrt::Buffer::create(s_.calbin, s_.prefill.name(), calrt::Direction::input, slot);
      io.prefill_out =
          calrt::Buffer::create(s_.calbin, s_.prefill.name(), calrt::Direction::output, slot);
      io.decode_in =
          calrt::Buffer::create(s_.calbin, s_.decode.name(), calrt::Direction::input, slot);
      io.decode_out =
          calrt::Buffer::create(s_.calbin, s_.decode.name(), calrt::Direction::output, slot);
    }
    for (uint32_t r = 0; r < o.concurrency; ++r) {
      kvs.push_back(calrt::Kv::allocate(s_.calbin, s_.kv_tokens_per_request()));
    }
  } catch (const calrt::Error& error) {
    throw BenchFailure(fmt::format("{} mode setup: {}", mode.mode, error.what()));
  }
  auto advance = [&](const char* kind, uint32_t run) {
    if (on_run_) {
      on_run_(mode, RunKey{std::string_view(kind) == "warmup", run});
    }
    if (progress_ != nullptr) {
      progress_->update(++runs_done_, fmt::format("{} {} {} done", mode.mode, kind, run + 1));
    }
  };
  for (uint32_t w = 0; w < o.warmup; ++w) {
    run_once(RunKey{true, w}, slots, kvs, mode);
    advance("warmup", w);
  }
  for (uint32_t r = 0; r < o.runs; ++r) {
    run_once(RunKey{false, r}, slots, kvs, mode);
    advance("run", r);
  }
  try {
    // Released explicitly, children first, so that a runtime error is reported.
    for (calrt::Kv& kv : kvs) {
      kv.free();
    }
    for (Slot& io : slots) {
      for (calrt::Buffer* buffer :
           {&io.prefill_in, &io.prefill_out, &io.decode_in, &io.decode_out}) {
        buffer->destroy();
      }
    }
    if (parallel) {
      s_.device.set_parallel_mode(false);
    }
  } catch (const calrt::Error& error) {
    throw BenchFailure(fmt::format("{} mode teardown: {}", mode.mode, error.what()));
  }
}

void BenchEngine::run_once(const RunKey& key, std::vector<Slot>& slots, std::vector<calrt::Kv>& kvs,
                           ModeRecord& mode) {
  const BenchOptions& o = s_.options;
  // Warm-up runs are traced only into a trace file that asks for them.
  trace_.set_recording(!key.warmup || (o.trace_warmup && !o.trace.empty()));
  RunState run{key, mode, slots, {}, {}, 0};
  for (uint32_t r = 0; r < o.concurrency; ++r) {
    try {
      kvs[r].clear();
    } catch (const calrt::Error& error) {
      throw BenchFailure(fmt::format("{} {}: Kv_Clear of request {}: {}", mode.mode, key.label(), r,
                                     error.what()));
    }
    Request& request = run.requests.emplace_back();
    request.index = r;
    request.prompt = bench_prompt(o.seed, key, r, o.prompt_len, s_.info.vocab);
    request.kv = &kvs[r];
    request.record.run = key;
    request.record.seq = r;
    run.ready.push_back(r);
  }
  run.remaining = o.concurrency;
  RunRecord record;
  record.run = key;
  record.begin = host_.device_now();
  const size_t first_job = mode.jobs.size();
  // Declared last: on an exception the jobs still in flight are destroyed (cancelled)
  // before anything they use.
  std::vector<std::optional<InFlight>> in_flight(slots.size());
  std::deque<uint32_t> submission_order;  // slots, oldest job first
  while (run.remaining > 0) {
    for (uint32_t slot = 0; slot < slots.size(); ++slot) {
      if (!in_flight[slot] && !run.ready.empty()) {
        const size_t request = run.ready.front();
        run.ready.pop_front();
        in_flight[slot] = InFlight{};
        in_flight[slot]->request = request;
        submit_next(run, request, slot, *in_flight[slot]);
        submission_order.push_back(slot);
      }
    }
    if (submission_order.empty()) {
      throw std::logic_error("bench scheduler: requests are left but no job is in flight");
    }
    const uint32_t oldest = submission_order.front();
    submission_order.pop_front();
    complete(run, *in_flight[oldest]);
    in_flight[oldest].reset();  // Job_Destroy; the slot's buffers are free again
  }
  record.end = host_.device_now();
  record.jobs = mode.jobs.size() - first_job;
  record.tokens = uint64_t{o.concurrency} * o.gen_len;
  mode.runs.push_back(record);
  for (Request& request : run.requests) {
    mode.sequences.push_back(std::move(request.record));
  }
}

void BenchEngine::submit_next(RunState& run, size_t index, uint32_t slot, InFlight& flight) {
  const BenchOptions& o = s_.options;
  Request& q = run.requests[index];
  const bool prefill = q.fed < o.prompt_len;
  ModelIo& io = prefill ? s_.prefill : s_.decode;
  Slot& buffers = run.slots[slot];
  calrt::Buffer& input = prefill ? buffers.prefill_in : buffers.decode_in;
  calrt::Buffer& output = prefill ? buffers.prefill_out : buffers.decode_out;
  const uint32_t count = prefill ? std::min(s_.info.prefill_chunk, o.prompt_len - q.fed) : 1u;
  const std::span<const int32_t> tokens =
      prefill ? std::span<const int32_t>(q.prompt).subspan(q.fed, count)
              : std::span<const int32_t>(q.record.tokens).last(1);

  JobRecord job;
  job.run = run.key;
  job.seq = q.index;
  job.kind = prefill ? JobKind::prefill : JobKind::decode;
  job.index = prefill ? q.chunks : q.decodes;
  job.tokens = count;
  job.past = q.fed;
  job.slot = slot;
  job.submission = submitted_ + 1;
  try {
    // Inputs as the smoke writes them: the KV bound to this slot's input buffer, tokens and
    // their positions (fed .. fed + count - 1), then cur_seq_len (tokens in this job) and
    // past_kv_cur_seq_len (tokens already in the KV).
    const uint64_t bytes = io.token().bytes + io.position().bytes;
    const HostSpan prepare = host_.run(bytes, [&] {
      q.kv->apply(input);
      std::vector<int32_t> positions(count);
      for (uint32_t t = 0; t < count; ++t) {
        positions[t] = static_cast<int32_t>(q.fed + t);
      }
      {
        const calrt::Mapping map = input.map(io.token_input, s_.timeout());
        write_row_i32(map.bytes(), io.token(), tokens);
      }
      {
        const calrt::Mapping map = input.map(io.position_input, s_.timeout());
        write_row_i32(map.bytes(), io.position(), positions);
      }
      input.set_csr(io.cur_seq_len_csr, count);
      input.set_csr(io.past_kv_csr, q.fed);
    });
    job.prepare_ns = prepare.charged_ns;
    run.mode.host.push_back(
        {"prepare", prepare.begin_ns, prepare.end_ns, job.submission, run.key, q.index});
    flight.job = calrt::Job::submit(s_.calbin, io.name(), input, output);
  } catch (const calrt::Error& error) {
    throw BenchFailure(fmt::format("{}: {}", where(run.mode, job), error.what()));
  }
  ++submitted_;
  (prefill ? q.chunks : q.decodes) += 1;
  flight.record = run.mode.jobs.size();
  run.mode.jobs.push_back(job);
}

void BenchEngine::complete(RunState& run, InFlight& flight) {
  const BenchOptions& o = s_.options;
  JobRecord& job = run.mode.jobs[flight.record];
  Request& q = run.requests[flight.request];
  try {
    job.wait_begin = host_.device_now();
    if (flight.job.wait(s_.timeout()) == calrt::WaitResult::not_ready) {
      flight.job.cancel();
      // Its timestamps so far, for the trace of the failure.
      const calrt::JobStatus status = flight.job.status();
      job.submit = status.submit_time.count();
      job.start = status.start_time.count();
      throw BenchFailure(fmt::format(
          "{}: the job did not finish within --timeout-ms {} (device time for the simulator); "
          "cancelled",
          where(run.mode, job), o.timeout_ms));
    }
    job.wait_end = host_.device_now();
    if (job.wait_end > job.wait_begin) {
      run.mode.host.push_back(
          {"wait", job.wait_begin, job.wait_end, job.submission, run.key, q.index});
    }
    const calrt::JobStatus status = flight.job.status();
    if (status.state != calrt::JobState::completed) {
      throw BenchFailure(fmt::format("{}: job {}: {} ({}): {}", where(run.mode, job),
                                     calrt::to_string(status.state), calrt::code_name(status.code),
                                     calrt::to_string(status.fault_class()), status.message));
    }
    job.submit = status.submit_time.count();
    job.start = status.start_time.count();
    job.h2d_end = status.h2d_end_time.count();
    job.compute_end = status.compute_end_time.count();
    job.compute_start = status.compute_start_time.count();
    job.end = status.end_time.count();
    trace_.drain();
  } catch (const calrt::Error& error) {
    throw BenchFailure(fmt::format("{}: {}", where(run.mode, job), error.what()));
  }
  q.fed += job.tokens;
  if (job.kind == JobKind::prefill) {
    if (job.index == 0) {
      q.record.first_submit = job.submit;
    }
    if (q.fed < o.prompt_len) {
      run.ready.push_back(flight.request);  // more chunks: no logits needed from this one
      return;
    }
    q.record.prefill_end = job.end;
  }
  Slot& buffers = run.slots[job.slot];
  const uint64_t submission = job.submission;
  try {
    finish_token(run, q, job.kind == JobKind::prefill ? s_.prefill : s_.decode,
                 job.kind == JobKind::prefill ? buffers.prefill_out : buffers.decode_out,
                 submission);
  } catch (const calrt::Error& error) {
    throw BenchFailure(
        fmt::format("{}: {}", where(run.mode, run.mode.jobs[flight.record]), error.what()));
  }
  if (q.record.tokens.size() >= o.gen_len) {
    --run.remaining;
  } else {
    run.ready.push_back(flight.request);
  }
}

void BenchEngine::finish_token(RunState& run, Request& q, const ModelIo& io, calrt::Buffer& output,
                               uint64_t submission) {
  const BenchOptions& o = s_.options;
  const uint64_t vocab = s_.info.vocab;
  const auto step = static_cast<uint64_t>(q.record.tokens.size());
  if (io.ranked()) {
    finish_ranked_token(run, q, io, output, submission);
    return;
  }
  if (o.sampling.method == SamplingMethod::greedy) {
    // Greedy needs the ranking only: the BF16 row is read once and no FP32 row is written
    // (rank_row, the same token bit for bit as the argmax of the converted row).
    int32_t token = -1;
    calrt::Mapping map;
    const HostSpan rank = host_.run(io.logits().bytes, [&] {
      map = output.map(io.logits_output, s_.timeout());
      token = rank_row(map.bytes(), io.logits(), 0, 0).argmax;
    });
    run.mode.host.push_back({"rank", rank.begin_ns, rank.end_ns, submission, run.key, q.index});
    // Bookkeeping of the bench itself, not charged: the row as the device stored it.
    if (fingerprints_logits()) {
      Fingerprint hash;
      visit_row_bytes(map.bytes(), io.logits(), 0, vocab,
                      [&](std::span<const std::byte> bytes) { hash.add(bytes); });
      q.record.logits_hashes.push_back(hash.digest());
    }
    q.record.tokens.push_back(token);
    q.record.token_ready.push_back(rank.end_ns);
    q.record.sample_ns.push_back(rank.charged_ns);
    q.record.step_ns.push_back(rank.charged_ns);
    return;
  }
  // The fused pass: the FP32 row and its top k in one read of the BF16 row (read_row_pick).
  const size_t k = std::clamp<size_t>(o.sampling.top_k, 1, vocab);
  std::vector<float> logits(vocab);
  RowPick pick;
  const HostSpan convert = host_.run(io.logits().bytes + 4 * vocab, [&] {
    const calrt::Mapping map = output.map(io.logits_output, s_.timeout());
    pick = read_row_pick(map.bytes(), io.logits(), 0, logits, k);
  });
  run.mode.host.push_back(
      {"bf16->fp32", convert.begin_ns, convert.end_ns, submission, run.key, q.index});
  // Bookkeeping of the bench itself, not part of the serving path: not charged.
  if (fingerprints_logits()) {
    q.record.logits_hashes.push_back(logits_fingerprint(logits));
  }
  const uint64_t stream =
      derive_stream(o.sampling.seed, {run.key.warmup ? 1u : 0u, run.key.run, q.index, step});
  int32_t token = -1;
  const uint64_t sample_bytes = 8 * k;  // the candidates' weights (bench_host_time.hpp)
  const HostSpan sample = host_.run(sample_bytes, [&] {
    std::vector<float> ranked;
    for (const int32_t id : pick.top_k) ranked.push_back(logits[static_cast<size_t>(id)]);
    token = pick.top_k.empty() ? pick.argmax
                               : pick.top_k[draw_candidate(ranked, o.sampling.temperature, stream)];
  });
  run.mode.host.push_back({"sample", sample.begin_ns, sample.end_ns, submission, run.key, q.index});
  q.record.tokens.push_back(token);
  q.record.token_ready.push_back(sample.end_ns);
  q.record.convert_ns.push_back(convert.charged_ns);
  q.record.sample_ns.push_back(sample.charged_ns);
  q.record.step_ns.push_back(convert.charged_ns + sample.charged_ns);
}

// A decode that ranked on the device: greedy is its first id; top-k sampling (k within the
// device's K, checked at load) draws from the first k candidates, the same k largest logits
// a host ranking of the full row keeps.
void BenchEngine::finish_ranked_token(RunState& run, Request& q, const ModelIo& io,
                                      calrt::Buffer& output, uint64_t submission) {
  const BenchOptions& o = s_.options;
  const auto step = static_cast<uint64_t>(q.record.tokens.size());
  const uint32_t k = io.top_k;
  DecodeRow row;
  int32_t token = -1;
  const bool greedy = o.sampling.method == SamplingMethod::greedy;
  const HostSpan read = host_.run(io.top_ids().bytes + io.top_logits().bytes, [&] {
    row = std::move(read_decode_rows(io, output, 1, s_.timeout()).front());
    const uint64_t stream =
        derive_stream(o.sampling.seed, {run.key.warmup ? 1u : 0u, run.key.run, q.index, step});
    const size_t first = greedy ? 1 : std::min<size_t>(o.sampling.top_k, k);
    token = row.ids[draw_candidate(std::span<const float>(row.logits).first(first),
                                   o.sampling.temperature, stream)];
  });
  run.mode.host.push_back(
      {greedy ? "rank" : "sample", read.begin_ns, read.end_ns, submission, run.key, q.index});
  // The token goes back to the device as the next input: a row that breaks the ABI's
  // promises (an id outside the vocabulary, one twice, out of order) stops the run. A
  // timing-only calbin's device computes nothing: its rows are zeros, id 0 K times.
  if (const std::string defect =
          s_.manifest.timing_only ? std::string() : ranked_row_defect(row, s_.info.vocab);
      !defect.empty()) {
    throw BenchFailure(fmt::format("decode model {}: {}", io.name(), defect));
  }
  // Bookkeeping of the bench itself, not charged: the ranked output as the device stored it.
  if (fingerprints_logits()) {
    Fingerprint hash;
    hash.add(std::as_bytes(std::span(row.ids)));
    hash.add(std::as_bytes(std::span(row.logits)));
    q.record.logits_hashes.push_back(hash.digest());
  }
  q.record.tokens.push_back(token);
  q.record.token_ready.push_back(read.end_ns);
  q.record.sample_ns.push_back(read.charged_ns);
  q.record.step_ns.push_back(read.charged_ns);
}

}  // namespace runner
