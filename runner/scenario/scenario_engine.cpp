// The scenario engine: steps become units of device work (a KV allocation, one prefill chunk,
// one decode step, ...), each run under the recovery policy. A unit that meets a device
// fault is retried after the reset ladder; from chip up the model is loaded again and every
// live sequence is first brought back to its last good state (its KV allocated again, its
// verified prefill chunks and decode steps replayed), which `epoch` tracks: it counts the
// times the device dropped its KV, and a sequence whose KV is from an older epoch is stale.
#include "runner/scenario/scenario_engine.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "runner/core/golden_compare.hpp"
#include "runner/core/session.hpp"
#include "runner/core/submission_inputs.hpp"
#include "runner/core/tensor_io.hpp"
#include "runner/scenario/recovery.hpp"

namespace runner {
namespace {

// The events log is for reading a failure, not a trace: a plan that faults every operation
// should not make a report of megabytes.
constexpr size_t kMaxEvents = 400;
// Every restore round follows a recovery, which max_recoveries bounds; this is the backstop.
constexpr int kMaxRestoreRounds = 10000;
constexpr uint64_t kNoEpoch = std::numeric_limits<uint64_t>::max();

enum class Flow {
  done,     // the unit's work is done (or, under the no-replay bug, believed done)
  failed,   // a request failure ended the unit; its sequence is failed, the run goes on
  restart,  // a recovery inside a restore changed what must be restored: start over
  stop,     // the run ends (device lost or unrecoverable)
};

struct Problem {
  enum class Kind { none, error, late, mismatch, unhealthy, setup };
  Kind kind = Kind::none;
  CalrtCode code = CALRT_OK;
  std::string message;

  explicit operator bool() const { return kind != Kind::none; }
  static Problem of(Kind kind, std::string message, CalrtCode code = CALRT_OK) {
    return Problem{kind, code, std::move(message)};
  }
};

enum class FaultLevel { request, model, device, lost };

enum class Check { none, prefill, decode };

struct Seq {
  std::string name;
  const calbin::GoldenCase* golden = nullptr;
  uint32_t capacity = 0;
  calrt::Kv kv;
  bool alive = false;            // the runner means it to hold a KV
  uint64_t kv_epoch = kNoEpoch;  // the epoch of its KV allocation
  uint32_t chunks = 0;           // prefill chunks done
  uint32_t decoded = 0;          // decode steps done
  uint64_t greedy_agree = 0;
  uint64_t greedy_total = 0;
  SequenceVerdict verdict;
};

class Engine {
 public:
  explicit Engine(const RunSpec& spec)
      : spec_(spec), scenario_(*spec.scenario), cases_(spec.calbin->inputs.golden), s_(options_) {
    options_.calbin = spec.calbin->dir;
    options_.timeout_ms = scenario_.timeout_ms;
    s_.inputs.golden.vocab = cases_.vocab;
    for (const std::string& name : scenario_.sequence_names()) {
      seqs_.emplace_back();
      seqs_.back().name = name;
      seqs_.back().verdict.name = name;
    }
    rec_.plan = plan_yaml(spec.seed, spec.faults);
  }

  RunRecord run() {
    try {
      if (open()) {
        run_steps();
        finish();
      }
    } catch (const std::exception& error) {
      rec_.engine_errors.push_back(std::string("unexpected error: ") + error.what());
    }
    judge();
    return std::move(rec_);
  }

 private:
  bool open();
  void run_steps();
  Flow run_step(size_t index, const Step& step);
  void finish();
  void teardown();
  void judge();

  template <class Unit>
  Flow run_unit(Seq* seq, const std::string& what, Unit&& unit, bool retry = true);
  template <class Unit>
  Problem attempt(Unit&& unit);
  FaultLevel classify(const Problem& problem);
  Flow after_request_failure();
  Flow recover_device();
  Flow recover_model();
  Flow settle(uint64_t epoch_before, bool ready_before);
  Flow restore();
  Flow replay(Seq& seq);
  Flow health_poll();
  void on_reset(calrt::ResetLevel level);
  void unload_model();

  Problem load_model();
  Problem allocate(Seq& seq);
  Problem prefill_chunk(Seq& seq, uint32_t chunk);
  Problem decode_step(Seq& seq, uint32_t step);
  Problem submit(Seq& seq, ModelIo& io, std::span<const int32_t> tokens, int32_t first_position,
                 Check check, uint32_t step);
  Problem user_reset(calrt::ResetLevel level);

  bool model_ready() const { return s_.calbin && s_.models_ok && s_.configured && s_.buffers_ok; }
  bool stopped() const { return lost_ || unrecoverable_; }
  uint32_t chunks_of(const Seq& seq) const;
  calrt::Timeout timeout() const { return std::chrono::milliseconds(scenario_.timeout_ms); }
  calrt::Timeout wait_timeout() const {
    return spec_.bug == PolicyBug::no_timeout ? calrt::kInfiniteTimeout : timeout();
  }
  Seq& sequence(const std::string& name);
  void drop_kv(Seq& seq);
  void drop_buffers();
  void fail_sequence(Seq* seq, const std::string& why, bool mismatch);
  void event(std::string text);

  const RunSpec& spec_;
  const Scenario& scenario_;
  const calbin::GoldenSet& cases_;
  SmokeOptions options_;
  Session s_;  // api, device, calbin, buffers: declared before what must go first
  std::optional<CallMeter> meter_;
  std::optional<Recovery> recovery_;
  std::vector<Seq> seqs_;
  calrt::Job late_job_;  // a job that missed its wait, kept until the reset cancels it
  RunRecord rec_;

  bool model_wanted_ = false;  // the configure step ran: the model should be loaded
  bool in_recovery_ = false;
  uint64_t epoch_ = 0;
  uint32_t recoveries_ = 0;
  bool recovered_any_ = false;
  bool request_failed_ = false;
  bool lost_ = false;
  bool unrecoverable_ = false;
  std::optional<calrt::ResetLevel> recovered_by_;
  std::optional<size_t> stopped_at_;  // the step the run ended in, when it ended early
  std::chrono::nanoseconds start_{0};
};

bool Engine::open() {
  s_.api = *spec_.api;
  DeviceSpec device = *spec_.device;
  device.config = device_config(scenario_, spec_.seed);
  try {
    s_.device = open_device(s_.api, device, timeout());
  } catch (const calrt::Error& error) {
    rec_.engine_errors.push_back(
        fmt::format("Device_Create with \"{}\": {}", device.config, error.what()));
    return false;
  }
  meter_.emplace(s_.device);
  recovery_.emplace(s_.device, *meter_, spec_.bug,
                    [this](std::string text) { event(std::move(text)); });
  const auto faults = calrt::DeviceFaults::of(s_.device);
  if (faults) {
    try {
      faults.set_plan(rec_.plan);
    } catch (const calrt::Error& error) {
      rec_.engine_errors.push_back(fmt::format("fault plan refused: {}", error.what()));
      return false;
    }
  } else if (!spec_.faults.empty()) {
    rec_.engine_errors.push_back(
        "the runtime has no fault injection extension (CALRT_EXT_FAULT): the plan cannot be set");
    return false;
  }
  start_ = meter_->now();
  return true;
}

void Engine::run_steps() {
  for (size_t i = 0; i < scenario_.steps.size(); ++i) {
    if (run_step(i, scenario_.steps[i]) == Flow::stop || stopped()) {
      stopped_at_ = i;
      return;
    }
    if (health_poll() == Flow::stop || stopped()) {
      stopped_at_ = i + 1;
      return;
    }
  }
}

Flow Engine::run_step(size_t index, const Step& step) {
  const std::string at = fmt::format("steps[{}] {}", index, to_string(step.kind));
  switch (step.kind) {
    case StepKind::configure:
      model_wanted_ = true;
      return run_unit(nullptr, at, [&] { return load_model(); });
    case StepKind::prefill: {
      Seq& seq = sequence(step.seq);
      if (!seq.verdict.ok) {
        event(at + " " + seq.name + ": skipped, the sequence failed");
        return Flow::done;
      }
      seq.golden = &cases_.cases[step.golden_case];
      seq.chunks = 0;
      seq.decoded = 0;
      if (!seq.alive) {
        seq.alive = true;
        seq.capacity = kv_tokens_for(*seq.golden, s_.info.context);
        seq.kv_epoch = kNoEpoch;
      }
      Flow flow =
          run_unit(&seq, at + " " + seq.name + " Kv_Allocate", [&] { return allocate(seq); });
      const uint32_t total = chunks_of(seq);
      for (uint32_t c = seq.chunks; c < total && flow == Flow::done; ++c) {
        flow = run_unit(&seq, fmt::format("{} {} chunk {}/{}", at, seq.name, c + 1, total),
                        [&] { return prefill_chunk(seq, c); });
        seq.chunks = flow == Flow::done ? c + 1 : seq.chunks;
      }
      return flow;
    }
    case StepKind::decode: {
      Seq& seq = sequence(step.seq);
      Flow flow = Flow::done;
      for (uint32_t k = 0; k < step.count && flow == Flow::done && seq.verdict.ok; ++k) {
        const uint32_t s = seq.decoded;
        flow = run_unit(&seq, fmt::format("{} {} step {}", at, seq.name, s),
                        [&] { return decode_step(seq, s); });
        seq.decoded = flow == Flow::done ? s + 1 : seq.decoded;
      }
      return flow;
    }
    case StepKind::kv_allocate: {
      Seq& seq = sequence(step.seq);
      if (!seq.verdict.ok) {
        event(at + " " + seq.name + ": skipped, the sequence failed");
        return Flow::done;
      }
      seq.golden = nullptr;
      seq.chunks = 0;
      seq.decoded = 0;
      seq.alive = true;
      seq.capacity = step.count;
      seq.kv_epoch = kNoEpoch;
      return run_unit(&seq, at + " " + seq.name, [&] { return allocate(seq); });
    }
    case StepKind::kv_clear: {
      Seq& seq = sequence(step.seq);
      const Flow flow = run_unit(&seq, at + " " + seq.name, [&] {
        meter_->timed("Kv_Clear", [&] { seq.kv.clear(); });
        return Problem{};
      });
      if (flow == Flow::done) {
        seq.chunks = 0;
        seq.decoded = 0;
      }
      return flow;
    }
    case StepKind::kv_free: {
      Seq& seq = sequence(step.seq);
      Flow flow = Flow::done;
      if (seq.verdict.ok && seq.alive) {
        flow = run_unit(&seq, at + " " + seq.name, [&] {
          if (seq.kv) {
            meter_->timed("Kv_Free", [&] { seq.kv.free(); });
          }
          return Problem{};
        });
      }
      seq.alive = false;
      drop_kv(seq);
      return flow == Flow::stop ? Flow::stop : Flow::done;
    }
    case StepKind::reset: {
      const uint64_t epoch_before = epoch_;
      const bool ready_before = model_ready();
      if (run_unit(
              nullptr, at, [&] { return user_reset(step.level); }, false) == Flow::stop) {
        return Flow::stop;
      }
      return settle(epoch_before, ready_before) == Flow::stop ? Flow::stop : Flow::done;
    }
    case StepKind::idle: {
      const auto clock = calrt::DeviceClock::of(s_.device);
      if (!clock) {
        event(at + ": the runtime has no clock extension; nothing to spend");
        return Flow::done;
      }
      const auto duration = std::chrono::microseconds(step.us);
      const Flow flow = run_unit(
          nullptr, at,
          [&] {
            clock.host_spend(duration);
            return Problem{};
          },
          false);
      return flow == Flow::stop ? Flow::stop : Flow::done;
    }
  }
  return Flow::done;
}

template <class Unit>
Problem Engine::attempt(Unit&& unit) {
  try {
    return unit();
  } catch (const calrt::Error& error) {
    return Problem::of(Problem::Kind::error, error.what(), error.code());
  } catch (const std::exception& error) {
    return Problem::of(Problem::Kind::setup, error.what());
  }
}

template <class Unit>
Flow Engine::run_unit(Seq* seq, const std::string& what, Unit&& unit, bool retry) {
  for (;;) {
    if (seq != nullptr && !seq->verdict.ok) {
      return Flow::failed;
    }
    const Problem problem = attempt(unit);
    if (!problem) {
      return Flow::done;
    }
    event(what + ": " + problem.message);
    if (problem.kind == Problem::Kind::mismatch) {
      fail_sequence(seq, what + ": " + problem.message, true);
      return after_request_failure();
    }
    if (problem.kind == Problem::Kind::setup) {
      rec_.engine_errors.push_back(what + ": " + problem.message);
      unrecoverable_ = true;
      return Flow::stop;
    }
    if (rec_.actual.first_error == CALRT_OK && problem.code != CALRT_OK) {
      rec_.actual.first_error = problem.code;
    }
    const FaultLevel level = classify(problem);
    if (level == FaultLevel::lost) {
      if (auto report = recovery_->hang_report()) {
        rec_.hang_reports.push_back(std::move(*report));
      }
      lost_ = true;
      recovered_by_.reset();
      return Flow::stop;
    }
    if (level == FaultLevel::request) {
      fail_sequence(seq, what + ": " + problem.message, false);
      return after_request_failure();
    }
    const Flow flow = level == FaultLevel::model ? recover_model() : recover_device();
    if (flow != Flow::done) {
      return flow;
    }
    if (spec_.bug == PolicyBug::no_replay || !retry) {
      return Flow::done;
    }
  }
}

FaultLevel Engine::classify(const Problem& problem) {
  if (problem.kind == Problem::Kind::late || problem.kind == Problem::Kind::unhealthy) {
    return FaultLevel::device;
  }
  const bool lost_is_request = spec_.bug == PolicyBug::lost_as_request;
  if (problem.code == CALRT_DEVICE_LOST) {
    return lost_is_request ? FaultLevel::request : FaultLevel::lost;
  }
  switch (calrt::fault_class_of(problem.code)) {
    case calrt::FaultClass::model:
      return FaultLevel::model;
    case calrt::FaultClass::device:
      return FaultLevel::device;
    case calrt::FaultClass::request:
      break;
  }
  // A call refused because the device is faulted is the device's fault, not the request's.
  if (problem.code == CALRT_WRONG_STATE) {
    try {
      const calrt::DeviceState state = s_.device.status().state;
      if (state == calrt::DeviceState::faulted) {
        return FaultLevel::device;
      }
      if (state == calrt::DeviceState::lost && !lost_is_request) {
        return FaultLevel::lost;
      }
    } catch (const calrt::Error&) {
      return FaultLevel::device;
    }
  }
  return FaultLevel::request;
}

Flow Engine::after_request_failure() {
  if (spec_.bug == PolicyBug::reset_request_faults && recover_device() == Flow::stop) {
    return Flow::stop;
  }
  return Flow::failed;
}

Flow Engine::recover_device() {
  if (auto report = recovery_->hang_report()) {
    rec_.hang_reports.push_back(std::move(*report));
  }
  if (recoveries_ >= scenario_.max_recoveries) {
    event(fmt::format("device fault after {} recoveries (max_recoveries): unrecoverable",
                      recoveries_));
    unrecoverable_ = true;
    recovered_by_.reset();
    return Flow::stop;
  }
  ++recoveries_;
  const uint64_t epoch_before = epoch_;
  const bool ready_before = model_ready();
  if (spec_.bug == PolicyBug::no_reset) {
    late_job_ = calrt::Job();
    event("no reset (policy bug no-reset): the unit is retried as is");
    return Flow::done;
  }
  const LadderResult ladder = recovery_->climb([&](calrt::ResetLevel level) { on_reset(level); });
  late_job_ = calrt::Job();
  if (ladder.lost) {
    lost_ = true;
    recovered_by_.reset();
    return Flow::stop;
  }
  if (!ladder.level) {
    event("no reset level passed its self-test: unrecoverable");
    unrecoverable_ = true;
    recovered_by_.reset();
    return Flow::stop;
  }
  recovered_by_ = ladder.level;
  recovered_any_ = true;
  return settle(epoch_before, ready_before);
}

Flow Engine::recover_model() {
  if (recoveries_ >= scenario_.max_recoveries) {
    event(fmt::format("model fault after {} recoveries (max_recoveries): unrecoverable",
                      recoveries_));
    unrecoverable_ = true;
    return Flow::stop;
  }
  ++recoveries_;
  if (spec_.bug == PolicyBug::no_reload) {
    event("no reload (policy bug no-reload): the unit is retried as is");
    return Flow::done;
  }
  const uint64_t epoch_before = epoch_;
  const bool ready_before = model_ready();
  event("model fault: unload and reload the model");
  unload_model();
  recovered_any_ = true;
  return settle(epoch_before, ready_before);
}

// After a recovery: inside a restore, only report whether it must start over; otherwise
// restore the model and the live sequences now.
Flow Engine::settle(uint64_t epoch_before, bool ready_before) {
  if (in_recovery_) {
    return epoch_ != epoch_before || model_ready() != ready_before ? Flow::restart : Flow::done;
  }
  in_recovery_ = true;
  const Flow flow = restore();
  in_recovery_ = false;
  return flow == Flow::stop ? Flow::stop : Flow::done;
}

Flow Engine::restore() {
  for (int round = 0; round < kMaxRestoreRounds; ++round) {
    if (model_wanted_ && !model_ready()) {
      const Flow flow = run_unit(nullptr, "reload the model", [&] { return load_model(); });
      if (flow == Flow::stop) {
        return Flow::stop;
      }
      if (flow == Flow::failed) {
        event("the model could not be loaded again: unrecoverable");
        unrecoverable_ = true;
        return Flow::stop;
      }
      continue;
    }
    if (spec_.bug == PolicyBug::no_replay) {
      return Flow::done;
    }
    auto stale = std::find_if(seqs_.begin(), seqs_.end(), [&](const Seq& seq) {
      return seq.alive && seq.verdict.ok && seq.kv_epoch != epoch_;
    });
    if (stale == seqs_.end()) {
      return Flow::done;
    }
    if (replay(*stale) == Flow::stop) {
      return Flow::stop;
    }
  }
  unrecoverable_ = true;
  return Flow::stop;
}

// Brings one sequence back to its last good state: a new KV, then its prefill chunks and
// decode steps as far as they had been done, each output compared again.
Flow Engine::replay(Seq& seq) {
  const uint64_t epoch = epoch_;
  event(fmt::format("replay {}: KV of {} tokens, {} prefill chunks, {} decode steps", seq.name,
                    seq.capacity, seq.chunks, seq.decoded));
  drop_kv(seq);
  auto outcome = [&](Flow flow) {
    if (flow == Flow::stop) {
      return Flow::stop;
    }
    return flow == Flow::restart || epoch_ != epoch ? Flow::restart : Flow::done;
  };
  Flow flow = run_unit(&seq, "replay " + seq.name + " Kv_Allocate", [&] { return allocate(seq); });
  for (uint32_t c = 0; c < seq.chunks && flow == Flow::done && epoch_ == epoch; ++c) {
    flow = run_unit(&seq, fmt::format("replay {} chunk {}/{}", seq.name, c + 1, chunks_of(seq)),
                    [&] { return prefill_chunk(seq, c); });
  }
  for (uint32_t s = 0; s < seq.decoded && flow == Flow::done && epoch_ == epoch; ++s) {
    flow = run_unit(&seq, fmt::format("replay {} step {}", seq.name, s),
                    [&] { return decode_step(seq, s); });
  }
  return outcome(flow);
}

Flow Engine::health_poll() {
  bool degraded = false;
  try {
    const uint32_t chips = s_.device.status().chip_count;
    for (uint32_t c = 0; c < chips && c < CALRT_MAX_CHIPS; ++c) {
      degraded = degraded || s_.device.chip_status(c).health == calrt::ChipHealth::degraded;
    }
  } catch (const calrt::Error&) {
    return Flow::done;  // the next call that matters reports it
  }
  if (!degraded || spec_.bug != PolicyBug::reset_on_degraded) {
    return Flow::done;
  }
  event("a chip is DEGRADED: reset (policy bug reset-on-degraded)");
  return recover_device() == Flow::stop ? Flow::stop : Flow::done;
}

void Engine::on_reset(calrt::ResetLevel level) {
  if (level < calrt::ResetLevel::chip) {
    return;
  }
  ++epoch_;  // every KV is gone with the chips' DRAM
  if (spec_.bug != PolicyBug::no_reload) {
    s_.configured = false;
    s_.buffers_ok = false;
  }
}

void Engine::unload_model() {
  for (Seq& seq : seqs_) {
    drop_kv(seq);
  }
  drop_buffers();
  s_.calbin = calrt::Calbin();
  s_.models_ok = false;
  s_.configured = false;
  s_.buffers_ok = false;
  ++epoch_;
}

Problem Engine::load_model() {
  if (!s_.calbin || !s_.models_ok) {
    StepResult setup;
    meter_->timed("Calbin_Create", [&] { load_calbin_models(s_, setup); });
    if (!setup.passed()) {
      return Problem::of(Problem::Kind::setup, fmt::format("{}", fmt::join(setup.failures, "; ")));
    }
    s_.configured = s_.info.configured;
    s_.buffers_ok = false;
  }
  if (s_.info.prefill_chunk == 0) {
    return Problem::of(Problem::Kind::setup, "the calbin's prefill_chunk is 0");
  }
  if (!s_.configured) {
    meter_->timed("Calbin_Configure", [&] { s_.calbin.configure(timeout()); });
    s_.configured = true;
  }
  if (!s_.buffers_ok) {
    drop_buffers();
    StepResult setup;
    meter_->timed("Buffer_Create", [&] { create_model_buffers(s_, setup); });
    if (!setup.passed()) {
      return Problem::of(Problem::Kind::setup, fmt::format("{}", fmt::join(setup.failures, "; ")));
    }
  }
  return {};
}

Problem Engine::allocate(Seq& seq) {
  if (seq.kv && seq.kv_epoch == epoch_) {
    return {};  // a replay inside the recovery allocated it already
  }
  drop_kv(seq);
  seq.kv =
      meter_->timed("Kv_Allocate", [&] { return calrt::Kv::allocate(s_.calbin, seq.capacity); });
  seq.kv_epoch = epoch_;
  return {};
}

uint32_t Engine::chunks_of(const Seq& seq) const {
  const uint32_t chunk = s_.info.prefill_chunk;
  return seq.golden == nullptr || chunk == 0 ? 0 : (seq.golden->prompt_len + chunk - 1) / chunk;
}

Problem Engine::prefill_chunk(Seq& seq, uint32_t chunk) {
  const uint32_t size = s_.info.prefill_chunk;
  const uint32_t offset = chunk * size;
  const uint32_t count = std::min(size, seq.golden->prompt_len - offset);
  const std::span<const int32_t> tokens(seq.golden->tokens.data() + offset, count);
  const bool last = chunk + 1 == chunks_of(seq);
  return submit(seq, s_.prefill, tokens, static_cast<int32_t>(offset),
                last ? Check::prefill : Check::none, 0);
}

Problem Engine::decode_step(Seq& seq, uint32_t step) {
  const int32_t token = seq.golden->greedy[step];
  const auto index = static_cast<int32_t>(seq.golden->prompt_len + step);
  return submit(seq, s_.decode, std::span<const int32_t>(&token, 1), index, Check::decode, step);
}

// One job: the sequence's KV applied to the shared input buffer, tokens, positions and CSRs
// written, submitted, waited for within the timeout, and its logits compared with golden.
Problem Engine::submit(Seq& seq, ModelIo& io, std::span<const int32_t> tokens,
                       int32_t first_position, Check check, uint32_t step) {
  const auto past = static_cast<uint64_t>(first_position);
  // A job may rewrite positions a failed attempt wrote already, but it must never continue
  // past what the KV holds: that gap is lost work nobody re-ran.
  const calrt::KvInfo kv = meter_->timed("Kv_Info", [&] { return seq.kv.info(); });
  if (kv.filled_tokens < past) {
    return Problem::of(Problem::Kind::mismatch,
                       fmt::format("the KV holds {} positions but the job continues at {}: "
                                   "positions {}..{} were never written",
                                   kv.filled_tokens, past, kv.filled_tokens, past - 1));
  }
  meter_->timed("Kv_Apply", [&] { seq.kv.apply(io.input); });
  const CsrValues csrs = meter_->timed(
      "Buffer_Map", [&] { return write_submission(io, tokens, first_position, past, timeout()); });
  if (csrs.cur_seq_len != tokens.size() || csrs.past_kv_cur_seq_len != past) {
    return Problem::of(
        Problem::Kind::mismatch,
        fmt::format("CSRs read back as cur_seq_len={} past_kv_cur_seq_len={}, set {} and {}",
                    csrs.cur_seq_len, csrs.past_kv_cur_seq_len, tokens.size(), past));
  }
  calrt::Job job = meter_->timed(
      "Job_Submit", [&] { return calrt::Job::submit(s_.calbin, io.name(), io.input, io.output); });
  const calrt::WaitResult waited =
      meter_->timed("Job_Wait", [&] { return job.wait(wait_timeout()); });
  if (waited == calrt::WaitResult::not_ready) {
    late_job_ = std::move(job);
    return Problem::of(
        Problem::Kind::late,
        fmt::format("job not finished within {} ms: late, treated as hung", scenario_.timeout_ms),
        CALRT_DEVICE_HUNG);
  }
  const calrt::JobStatus status = job.status();
  job = calrt::Job();
  if (status.state != calrt::JobState::completed) {
    CalrtCode code = status.code;
    if (code == CALRT_OK) {
      code = status.state == calrt::JobState::timed_out ? CALRT_DEVICE_HUNG : CALRT_CANCELLED;
    }
    return Problem::of(Problem::Kind::error,
                       fmt::format("job {}: {} ({}): {}", calrt::to_string(status.state),
                                   calrt::code_name(code), fault_class_name(code), status.message),
                       code);
  }
  if (check == Check::none || spec_.bug == PolicyBug::skip_output_check) {
    return {};
  }
  DecodeRow output;
  if (io.ranked()) {
    // Its two outputs mapped and read: the one Buffer_Map the meter counts.
    output = meter_->timed("Buffer_Map", [&] { return read_decode_row(io, timeout()); });
  } else {
    const calrt::Mapping map =
        meter_->timed("Buffer_Map", [&] { return io.output.map(io.logits_output, timeout()); });
    output.logits = read_row_f32(map.bytes(), io.logits());
  }
  const size_t vocab = s_.info.vocab;
  if (output.ranked()) {
    if (const std::string defect = ranked_row_defect(output, vocab); !defect.empty()) {
      return Problem::of(Problem::Kind::mismatch, "output does not match golden: " + defect);
    }
  }
  const size_t top_k = cases_.top_k;
  const Comparison c = check == Check::prefill ? compare_prefill(output.logits, *seq.golden, top_k)
                                               : compare_decode(output, *seq.golden, step, top_k);
  ++seq.greedy_total;
  seq.greedy_agree += c.argmax == c.expected_argmax ? 1 : 0;
  // The FP32 gates open to the contract reference's distance at this shape, as in the smoke.
  const uint64_t token = check == Check::prefill ? seq.golden->prompt_len - 1
                                                 : uint64_t{seq.golden->prompt_len} + step;
  std::optional<Comparison> reference;
  if (options_.thresholds.scale_fp32_gates) {
    if (check == Check::prefill) {
      if (const auto row = contract_row(*seq.golden, token, vocab)) {
        reference = compare_prefill(*row, *seq.golden, top_k);
      }
    } else {
      reference = compare_contract_decode(output, *seq.golden, token, step, vocab, top_k);
    }
  }
  // A greedy disagreement is counted above, not gated: a corrupted output fails cosine and
  // top-k anyway.
  const RowJudgement judged = judge_row(c, options_.thresholds, reference);
  if (!judged.failures.empty()) {
    return Problem::of(Problem::Kind::mismatch, fmt::format("output does not match golden: {}",
                                                            fmt::join(judged.failures, "; ")));
  }
  return {};
}

Problem Engine::user_reset(calrt::ResetLevel level) {
  try {
    recovery_->reset(level);
  } catch (const calrt::Error&) {
    on_reset(level);
    throw;
  }
  on_reset(level);
  const SelfTest test = recovery_->self_test();
  event(fmt::format("reset {}: self-test {} ({})", to_string(level),
                    test.passed ? "passed" : "failed", test.detail));
  if (test.lost) {
    return Problem::of(Problem::Kind::error, "device lost", CALRT_DEVICE_LOST);
  }
  if (!test.passed) {
    return Problem::of(Problem::Kind::unhealthy,
                       "self-test failed after the reset: " + test.detail);
  }
  return {};
}

Seq& Engine::sequence(const std::string& name) {
  return *std::find_if(seqs_.begin(), seqs_.end(),
                       [&](const Seq& seq) { return seq.name == name; });
}

void Engine::drop_kv(Seq& seq) {
  if (seq.kv) {
    try {
      seq.kv.free();
    } catch (const calrt::Error&) {
      // Dropped with its calbin or by a reset: nothing left to free.
    }
  }
  seq.kv_epoch = kNoEpoch;
}

// Destroying a buffer the device already dropped fails harmlessly; nothing to report.
void Engine::drop_buffers() {
  for (ModelIo* io : {&s_.prefill, &s_.decode}) {
    io->input = calrt::Buffer();
    io->output = calrt::Buffer();
  }
}

void Engine::fail_sequence(Seq* seq, const std::string& why, bool mismatch) {
  if (seq == nullptr) {
    request_failed_ = true;
    return;
  }
  if (seq->verdict.ok) {
    seq->verdict.ok = false;
    seq->verdict.mismatch = mismatch;
    seq->verdict.why = why;
  }
  seq->alive = false;
  drop_kv(*seq);
}

void Engine::event(std::string text) {
  if (rec_.events.size() < kMaxEvents) {
    rec_.events.push_back(std::move(text));
  } else if (rec_.events.size() == kMaxEvents) {
    rec_.events.push_back("further events not shown");
  }
  spdlog::debug("scenario {}: {}", scenario_.name, rec_.events.back());
}

// Depth-first search for `key` in a diag report, so the check does not depend on where the
// report nests its counters.
const nlohmann::json* find_key(const nlohmann::json& doc, const std::string& key) {
  if (doc.is_object()) {
    if (auto found = doc.find(key); found != doc.end()) {
      return &*found;
    }
  }
  if (doc.is_structured()) {
    for (const auto& item : doc) {
      if (const auto* found = find_key(item, key)) {
        return found;
      }
    }
  }
  return nullptr;
}

uint64_t sum_counts(const nlohmann::json& value) {
  if (value.is_number_unsigned() || value.is_number_integer()) {
    return static_cast<uint64_t>(std::max<int64_t>(value.get<int64_t>(), 0));
  }
  uint64_t sum = 0;
  if (value.is_structured()) {
    for (const auto& item : value) {
      sum += sum_counts(item);
    }
  }
  return sum;
}

void Engine::finish() {
  bool lost_state = lost_;
  try {
    const calrt::DeviceState state = s_.device.status().state;
    rec_.actual.device_state = calrt::to_string(state);
    lost_state = lost_state || state == calrt::DeviceState::lost;
  } catch (const calrt::Error& error) {
    event(std::string("Device_Status at the end: ") + error.what());
  }
  const auto diag = calrt::DeviceDiag::of(s_.device);
  if (diag) {
    try {
      rec_.state_hash = diag.state_hash();
    } catch (const calrt::Error& error) {
      event(std::string("Diag_StateHash: ") + error.what());
    }
  }
  rec_.device_ms = std::chrono::duration<double, std::milli>(meter_->now() - start_).count();
  teardown();
  rec_.actual.max_call_ms = std::chrono::duration<double, std::milli>(meter_->longest()).count();
  rec_.calls = meter_->calls();
  rec_.longest_reset_ms =
      std::chrono::duration<double, std::milli>(meter_->longest("Device_Reset")).count();
  if (diag) {
    try {
      const auto report = nlohmann::json::parse(diag.report(), nullptr, false);
      if (const auto* live = find_key(report, "live"); live != nullptr && !lost_state) {
        rec_.live_after_teardown = sum_counts(*live);
        rec_.live_detail = live->dump();
      }
      if (const auto* violations = find_key(report, "state_machine_violations")) {
        rec_.state_machine_violations = sum_counts(*violations);
      }
    } catch (const calrt::Error& error) {
      event(std::string("Diag_Report after teardown: ") + error.what());
    }
  }
  if (const auto faults = calrt::DeviceFaults::of(s_.device)) {
    try {
      rec_.hits = faults.hits();
    } catch (const calrt::Error& error) {
      event(std::string("Fault_GetHits: ") + error.what());
    }
  }
}

// Everything the run holds goes back, children first; errors are of no interest here since
// the leak check afterwards asks the device what is still alive.
void Engine::teardown() {
  late_job_ = calrt::Job();
  for (Seq& seq : seqs_) {
    drop_kv(seq);
  }
  drop_buffers();
  s_.calbin = calrt::Calbin();
}

void Engine::judge() {
  RunActual& a = rec_.actual;
  // A sequence whose steps the end of the run cut short did not get its work done.
  for (size_t i = stopped_at_.value_or(scenario_.steps.size()); i < scenario_.steps.size(); ++i) {
    const Step& step = scenario_.steps[i];
    if (!step.seq.empty()) {
      Seq& seq = sequence(step.seq);
      if (seq.verdict.ok) {
        seq.verdict.ok = false;
        seq.verdict.why = fmt::format("cut short: the run ended ({}) at steps[{}] {}",
                                      lost_ ? "device lost" : "unrecoverable", *stopped_at_,
                                      to_string(scenario_.steps[*stopped_at_].kind));
      }
    }
  }
  for (Seq& seq : seqs_) {
    seq.verdict.greedy_agree = seq.greedy_agree;
    seq.verdict.greedy_total = seq.greedy_total;
    a.sequences.push_back(seq.verdict);
  }
  const bool any_failed = std::any_of(a.sequences.begin(), a.sequences.end(),
                                      [](const SequenceVerdict& v) { return !v.ok; });
  if (lost_) {
    a.outcome = Outcome::device_lost;
  } else if (unrecoverable_) {
    a.outcome = Outcome::unrecoverable;
  } else if (request_failed_ || any_failed) {
    a.outcome = Outcome::request_failed;
  } else {
    a.outcome = recovered_any_ ? Outcome::recovered : Outcome::pass;
  }
  a.recovered_by = recovered_by_;
  a.resets = recovery_ ? recovery_->resets() : 0;
}

}  // namespace

std::string device_config(const Scenario& scenario, uint64_t seed) {
  std::string config = "seed=" + std::to_string(seed);
  // A random fault plan that breaks one of the simulator's invariants stops at that line
  // (simdev/device/base/invariants.hpp) instead of surfacing later as a wrong count.
  if (scenario.device.find("strict=") == std::string::npos) config += ";strict=on";
  if (!scenario.device.empty()) {
    config += ";" + scenario.device;
  }
  return config;
}

RunRecord run_scenario_steps(const RunSpec& spec) { return Engine(spec).run(); }

}  // namespace runner
