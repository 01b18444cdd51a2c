// How fast a blocked waiter wakes. Two floors from the standard library, and Job_Wait on the
// simulator in paced mode (device time follows the host's monotonic clock, so a wait really
// sleeps) measured the same way:
//   BM_CondvarHandoff   a thread blocked on a std::condition_variable, notified by another;
//   BM_WaitWakeup       Job_Wait woken by a Job_Cancel from another thread (tiny calbin);
//   BM_CondvarTimedWake a condition-variable wait that ends at its own deadline;
//   BM_WaitCompletion   Job_Wait woken by the job completing at device time T (the reference
//                       model, timing-only: a functional calbin would add the simulator's own
//                       computation of the model, on the waiting thread, to every sample).
//
// In the handoffs the waiter arms the waker thread and blocks; the waker sleeps kSettle so
// that the waiter is asleep in the kernel, records steady_clock and wakes it; the waiter
// records steady_clock on return. The counters p50_ns, p90_ns, p99_ns and mean_ns are over
// those differences (return time minus wake or deadline time); the Time column is the whole
// cycle, sleeps included, and says nothing about latency. The two Job_Wait benchmarks also
// take one sample of their floor after each of their own (condvar_* and timed_* counters,
// p50_vs_* their ratio): on a shared machine the ratio of two separate runs wanders with the
// other load. scripts/bench.sh prints the ratios.
//
// The calbins come from $CALRT_BENCH_CALBIN (tiny) and $CALRT_BENCH_REFERENCE_CALBIN
// (qwen3-30b-a3b), or are generated into a temporary directory, removed at exit.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.hpp"
#include "abi/calrt_loader.hpp"
#include "benchmarks/checked_main.hpp"
#include "runner/core/tensor_io.hpp"
#include "simdev/gen/generate.hpp"
#include "simdev/runtime/sim_api.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// How long a waiter sleeps before it is woken: long past its way into the kernel, and of the
// order of a decode step, so that its CPU has gone idle as it would while the device works.
constexpr auto kSettle = 1ms;
// Far longer than any handoff: a waiter that is not woken shows up as a huge sample.
constexpr auto kWaitTimeout = std::chrono::duration_cast<calrt::Timeout>(30s);

double ns_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::nano>(to - from).count();
}

// p50/p90/p99/mean of the samples as counters (plain values, not rates), their names
// prefixed by `prefix`; returns the p50.
double report_latency(benchmark::State& state, std::vector<double> samples,
                      const std::string& prefix = "") {
  if (samples.empty()) {
    return 0.0;
  }
  auto percentile = [&](double p) {
    const auto at = static_cast<size_t>(p * static_cast<double>(samples.size() - 1));
    std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(at),
                     samples.end());
    return samples[at];
  };
  const double mean =
      std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  const double p50 = percentile(0.50);
  state.counters[prefix + "p50_ns"] = p50;
  state.counters[prefix + "mean_ns"] = mean;
  if (prefix.empty()) {
    state.counters["p90_ns"] = percentile(0.90);
    state.counters["p99_ns"] = percentile(0.99);
  }
  return p50;
}

// The ABI benchmarks interleave one floor sample with each of their own, so that both see the
// same machine (other load, idle CPUs): their ratio is then steadier than that of two runs.
void report_against_floor(benchmark::State& state, std::vector<double> samples,
                          std::vector<double> floor, const std::string& floor_name) {
  const double p50 = report_latency(state, std::move(samples));
  const double floor_p50 = report_latency(state, std::move(floor), floor_name + "_");
  if (floor_p50 > 0.0) {
    state.counters["p50_vs_" + floor_name] = p50 / floor_p50;
  }
}

// The second thread of a handoff. Each arm(act) makes it sleep kSettle and then run `act`,
// which wakes the waiter and returns the steady_clock time it counts from.
class Waker {
 public:
  Waker() : thread_([this] { run(); }) {}
  ~Waker() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;

  void arm(std::function<Clock::time_point()> act) {
    {
      std::lock_guard lock(mutex_);
      act_ = std::move(act);
      armed_ = true;
      done_ = false;
    }
    cv_.notify_all();
  }

  // Waits until the action of the last arm() has returned (so that nothing it touches is
  // released under it) and returns the time it counted from.
  Clock::time_point wait_done() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return done_; });
    return acted_at_;
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [&] { return armed_ || stop_; });
      if (stop_) {
        return;
      }
      armed_ = false;
      const std::function<Clock::time_point()> act = std::move(act_);
      lock.unlock();
      std::this_thread::sleep_for(kSettle);
      const Clock::time_point at = act();
      lock.lock();
      acted_at_ = at;
      done_ = true;
      cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<Clock::time_point()> act_;
  bool armed_ = false;
  bool done_ = false;
  bool stop_ = false;
  Clock::time_point acted_at_{};
  std::thread thread_;  // last: it starts running in the constructor
};

// One bare condition-variable handoff through `waker`, in ns from the notifier's lock to the
// waiter's return: the floor of every handoff.
class CondvarHandoff {
 public:
  double sample(Waker& waker) {
    std::unique_lock lock(mutex_);
    flag_ = false;
    waker.arm([this] {
      Clock::time_point at;
      {
        std::lock_guard notifier_lock(mutex_);
        at = Clock::now();
        flag_ = true;
      }
      cv_.notify_one();
      return at;
    });
    cv_.wait(lock, [&] { return flag_; });
    const Clock::time_point woke = Clock::now();
    lock.unlock();
    return ns_between(waker.wait_done(), woke);
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool flag_ = false;
};

// One condition-variable wait that nobody notifies, in ns from its deadline to its return:
// a kernel timer, then scheduling; the floor of a wait that ends when a time is due.
double timed_wake_sample() {
  std::mutex mutex;
  std::condition_variable cv;
  std::unique_lock lock(mutex);
  const Clock::time_point deadline = Clock::now() + kSettle;
  cv.wait_until(lock, deadline, [] { return false; });
  return ns_between(deadline, Clock::now());
}

// ---------------------------------------------------------------------------------------
// (a) The bare condition-variable handoff.
// ---------------------------------------------------------------------------------------

void BM_CondvarHandoff(benchmark::State& state) {
  Waker waker;
  CondvarHandoff handoff;
  std::vector<double> samples;
  for (auto _ : state) {
    samples.push_back(handoff.sample(waker));
  }
  report_latency(state, std::move(samples));
}
BENCHMARK(BM_CondvarHandoff)->UseRealTime();

// ---------------------------------------------------------------------------------------
// The simulator, in-process, with the tiny calbin configured and one decode job ready to go.
// ---------------------------------------------------------------------------------------

std::filesystem::path g_generated_dir;

// $env, or the preset generated once into the temporary directory (no golden set: only the
// model is needed, and the golden computation takes longest).
std::filesystem::path calbin_path(const char* env, const std::string& preset) {
  if (const char* path = std::getenv(env); path != nullptr && *path != '\0') {
    return path;
  }
  if (g_generated_dir.empty()) {
    g_generated_dir =
        std::filesystem::temp_directory_path() / ("calrt-wait-bench-" + std::to_string(::getpid()));
  }
  simdev::gen::GenOptions options;
  options.preset = preset;
  options.out_dir = g_generated_dir / preset;
  if (std::filesystem::exists(options.out_dir / "manifest.json")) {
    return options.out_dir;
  }
  options.with_golden = false;
  options.long_cases = false;
  options.force = true;
  if (auto made = simdev::gen::generate(options); !made) {
    throw std::runtime_error("generating the " + preset +
                             " calbin failed: " + made.error().to_string());
  }
  return options.out_dir;
}

struct Session {
  // Declared parent first, so that members are destroyed children first.
  calrt::Device device;
  calrt::Calbin calbin;
  calrt::Buffer input;
  calrt::Buffer output;
  calrt::Kv kv;
  std::string decode_model;

  calrt::Job submit() const { return calrt::Job::submit(calbin, decode_model, input, output); }
};

void write_one(calrt::Buffer& buffer, const calrt::ModelDesc& model, calrt::TensorRole role,
               int32_t value) {
  const calrt::TensorDesc* desc = model.find_tensor(calrt::Direction::input, role);
  if (desc == nullptr) {
    throw std::runtime_error("decode model " + model.name + " has no " + calrt::to_string(role) +
                             " input");
  }
  calrt::Mapping mapping = buffer.map(desc->index);
  const int32_t values[] = {value};
  runner::write_row_i32(mapping.bytes(), *desc, values);
}

uint32_t csr_index(const calrt::ModelDesc& model, const char* name) {
  const calrt::CsrDesc* csr = model.find_csr(name);
  if (csr == nullptr) {
    throw std::runtime_error("decode model " + model.name + " has no CSR " + name);
  }
  return csr->index;
}

// A device in paced mode with `config` appended, the calbin configured, and the decode
// model's buffers holding token 1 at position 0 with a KV applied.
std::unique_ptr<Session> open_session(const std::filesystem::path& calbin,
                                      const std::string& config) {
  const CalrtApi* table = calrt_sim_get_api(CALRT_ABI_MAJOR);
  calrt::validate_table(table, CALRT_ABI_MAJOR, "sim (in-process)");
  const calrt::Api api(table);
  auto s = std::make_unique<Session>();
  s->device = calrt::Device::create(api, calrt::DeviceKind::sim, 0, "clock=paced;" + config);
  s->calbin = calrt::Calbin::create(s->device, calbin);
  s->calbin.configure();
  std::optional<calrt::ModelDesc> decode;
  for (calrt::ModelDesc& model : s->calbin.models()) {
    if (model.type == calrt::ModelType::decode) {
      decode = std::move(model);
    }
  }
  if (!decode) {
    throw std::runtime_error(calbin.string() + " has no decode model");
  }
  s->decode_model = decode->name;
  s->input = calrt::Buffer::create(s->calbin, s->decode_model, calrt::Direction::input);
  s->output = calrt::Buffer::create(s->calbin, s->decode_model, calrt::Direction::output);
  write_one(s->input, *decode, calrt::TensorRole::token, 1);
  write_one(s->input, *decode, calrt::TensorRole::position, 0);
  s->input.set_csr(csr_index(*decode, "cur_seq_len"), 1);
  s->input.set_csr(csr_index(*decode, "past_kv_cur_seq_len"), 0);
  s->kv = calrt::Kv::allocate(s->calbin, 16);
  s->kv.apply(s->input);
  return s;
}

// Opens a session or marks the benchmark skipped with the runtime's message (a runtime
// without paced mode rejects clock=paced with INVALID_ARGUMENT).
std::unique_ptr<Session> open_or_skip(benchmark::State& state, const char* calbin_env,
                                      const std::string& preset, const std::string& config) {
  try {
    return open_session(calbin_path(calbin_env, preset), config);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return nullptr;
  }
}

// ---------------------------------------------------------------------------------------
// (b) Job_Wait woken by Job_Cancel from another thread.
// ---------------------------------------------------------------------------------------

void BM_WaitWakeup(benchmark::State& state) {
  // The job waits 10 s of device time before its input DMA, so only the cancel ends it.
  const std::unique_ptr<Session> s =
      open_or_skip(state, "CALRT_BENCH_CALBIN", "tiny", "submit_overhead_ns=10000000000");
  if (!s) {
    return;
  }
  calrt::Job job;
  Waker waker;
  CondvarHandoff handoff;
  std::vector<double> samples;
  std::vector<double> condvar;
  // How long the waker's Job_Cancel call takes, notify included: the part of the latency
  // spent before the waiter can run at all.
  std::vector<double> cancel_ns;
  int64_t not_cancelled = 0;
  bool armed = false;
  try {
    for (auto _ : state) {
      job = s->submit();
      waker.arm([&] {
        const Clock::time_point at = Clock::now();
        job.cancel();
        cancel_ns.push_back(ns_between(at, Clock::now()));
        return at;
      });
      armed = true;
      const calrt::WaitResult result = job.wait(kWaitTimeout);
      const Clock::time_point woke = Clock::now();
      const Clock::time_point cancelled_at = waker.wait_done();
      armed = false;
      if (result != calrt::WaitResult::ready) {
        state.SkipWithError("Job_Wait returned NOT_READY: the cancel did not end the wait");
        break;
      }
      not_cancelled += job.status().state == calrt::JobState::cancelled ? 0 : 1;
      samples.push_back(ns_between(cancelled_at, woke));
      job.destroy();
      condvar.push_back(handoff.sample(waker));
    }
  } catch (const std::exception& e) {
    if (armed) {
      waker.wait_done();  // the cancel may still be running on the job
    }
    state.SkipWithError(e.what());
  }
  state.counters["not_cancelled"] = static_cast<double>(not_cancelled);
  if (!cancel_ns.empty()) {
    std::sort(cancel_ns.begin(), cancel_ns.end());
    state.counters["cancel_call_p50_ns"] = cancel_ns[cancel_ns.size() / 2];
  }
  report_against_floor(state, std::move(samples), std::move(condvar), "condvar");
}
BENCHMARK(BM_WaitWakeup)->UseRealTime();

// ---------------------------------------------------------------------------------------
// The floor of (c): a condition-variable wait ending at its deadline, as a paced Job_Wait
// ends when the job's completion is due.
// ---------------------------------------------------------------------------------------

void BM_CondvarTimedWake(benchmark::State& state) {
  std::vector<double> samples;
  for (auto _ : state) {
    samples.push_back(timed_wake_sample());
  }
  report_latency(state, std::move(samples));
}
BENCHMARK(BM_CondvarTimedWake)->UseRealTime();

// ---------------------------------------------------------------------------------------
// (c) Job_Wait woken by the job's completion at device time T: latency = return time -
// the steady_clock time of T. Paced mode keeps device time = steady_clock + a constant, and
// Clock_Get tells the constant; a run whose constant moves is reported, not trusted.
// ---------------------------------------------------------------------------------------

// device_ns - steady_ns, from the Clock_Get call bracketed most tightly of a few.
std::chrono::nanoseconds clock_offset(const calrt::DeviceClock& clock) {
  std::chrono::nanoseconds best_offset{0};
  std::chrono::nanoseconds best_width = std::chrono::nanoseconds::max();
  for (int i = 0; i < 5; ++i) {
    const Clock::time_point before = Clock::now();
    const std::chrono::nanoseconds device = clock.now();
    const Clock::time_point after = Clock::now();
    const auto width = std::chrono::duration_cast<std::chrono::nanoseconds>(after - before);
    if (width < best_width) {
      best_width = width;
      const auto middle = before.time_since_epoch() + width / 2;
      best_offset = device - std::chrono::duration_cast<std::chrono::nanoseconds>(middle);
    }
  }
  return best_offset;
}

void BM_WaitCompletion(benchmark::State& state) {
  // A decode step of the reference model takes milliseconds of device time: the waiter is
  // long asleep when it completes.
  const std::unique_ptr<Session> s =
      open_or_skip(state, "CALRT_BENCH_REFERENCE_CALBIN", "qwen3-30b-a3b", "");
  if (!s) {
    return;
  }
  std::vector<double> samples;
  std::vector<double> timed;
  double offset_drift_max_ns = 0.0;
  try {
    const calrt::DeviceClock clock = calrt::DeviceClock::of(s->device);
    if (!clock || clock.mode() != calrt::ClockMode::paced) {
      state.SkipWithError("the runtime reports no paced device clock (clock extension)");
      return;
    }
    // Configure moved device time ahead at once (by the reference's weight upload, most of a
    // second); the first wait absorbs that, so the clock follows the host's afterwards.
    calrt::Job warmup = s->submit();
    warmup.wait(kWaitTimeout);
    warmup.destroy();
    for (auto _ : state) {
      const std::chrono::nanoseconds offset_before = clock_offset(clock);
      calrt::Job job = s->submit();
      const calrt::WaitResult result = job.wait(kWaitTimeout);
      const Clock::time_point woke = Clock::now();
      const std::chrono::nanoseconds offset_after = clock_offset(clock);
      const calrt::JobStatus status = job.status();
      if (result != calrt::WaitResult::ready || status.state != calrt::JobState::completed) {
        state.SkipWithError(("the decode job ended " + std::string(calrt::to_string(status.state)) +
                             ": " + status.message)
                                .c_str());
        break;
      }
      offset_drift_max_ns =
          std::max(offset_drift_max_ns,
                   std::abs(static_cast<double>((offset_after - offset_before).count())));
      const std::chrono::nanoseconds offset = offset_before + (offset_after - offset_before) / 2;
      const Clock::time_point completed_at(
          std::chrono::duration_cast<Clock::duration>(status.end_time - offset));
      samples.push_back(ns_between(completed_at, woke));
      job.destroy();
      timed.push_back(timed_wake_sample());
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  // How far the device-minus-host offset moved across one wait; large values mean the
  // samples are off by about that much.
  state.counters["offset_drift_max_ns"] = offset_drift_max_ns;
  report_against_floor(state, std::move(samples), std::move(timed), "timed");
}
BENCHMARK(BM_WaitCompletion)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 2;
  }
  benchmark::AddCustomContext(
      "settle_us",
      std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(kSettle).count()));
  const size_t failed = calrt_bench::run_benchmarks_checked();
  benchmark::Shutdown();
  if (!g_generated_dir.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(g_generated_dir, ignored);
  }
  return failed == 0 ? 0 : 1;
}
