// THR: threads. abi/CONFORMANCE.md#thr-threads
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "runner/conformance/clauses/clauses.hpp"

namespace runner {
namespace {

using std::chrono::milliseconds;

void thr_concurrent(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::configured);
  constexpr int kThreads = 4;
  constexpr int kIterations = 200;
  std::vector<calrt::Buffer> buffers;
  for (int t = 0; t < kThreads; ++t) {
    buffers.push_back(
        calrt::Buffer::create(f.calbin, ctx.manifest.models.front().name, calrt::Direction::input));
  }
  std::mutex mutex;
  std::string first_error;
  std::exception_ptr beyond_table;  // an older table: the clause skips, it does not fail
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < kIterations; ++i) {
          (void)f.device.status();
          (void)f.device.chip_status(0);
          (void)f.calbin.info();
          (void)f.calbin.kv_capacity();
          {
            const calrt::Mapping mapping = buffers[t].map(0, kClauseWait);
            std::memset(mapping.bytes().data(), t, mapping.size());
          }
          calrt::Kv kv = calrt::Kv::allocate(f.calbin, 1);
          kv.free();
        }
      } catch (const calrt::EntryBeyondTable&) {
        const std::lock_guard lock(mutex);
        if (!beyond_table) beyond_table = std::current_exception();
      } catch (const std::exception& error) {
        const std::lock_guard lock(mutex);
        if (first_error.empty()) {
          first_error = fmt::format("thread {}: {}", t, error.what());
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  require(first_error.empty(), first_error);
  if (beyond_table) std::rethrow_exception(beyond_table);
  for (int t = 0; t < kThreads; ++t) {
    const calrt::Mapping mapping = buffers[t].map(0, kClauseWait);
    for (const std::byte b : mapping.bytes()) {
      require(b == static_cast<std::byte>(t),
              fmt::format("buffer of thread {} was overwritten", t));
    }
  }
  const uint32_t live = f.calbin.kv_capacity().live_handles;
  require(live == 0, fmt::format("{} KV handles live after every thread freed its own", live));
}

void thr_no_blocking(ClauseContext& ctx) {
  Fixture f = ctx.fixture(Setup::ready);
  ctx.plan_hang(f.device);
  calrt::Job job = ctx.submit(f, f.prefill);
  CalrtJob* raw = job.get();
  std::atomic<bool> waiting{true};
  CallOutcome waited;
  CalrtWaitResult result = CALRT_WAIT_NOT_READY;
  std::thread waiter([&] {
    auto args = args_of<Calrt_Job_Wait_Args>();
    args.job = raw;
    args.timeout_ns =
        static_cast<uint64_t>(std::chrono::nanoseconds(std::chrono::seconds(2)).count());
    try {
      waited = CONF_CALL(ctx, Job_Wait, args);
      result = args.result;
    } catch (const std::exception& error) {
      waited = CallOutcome{CALRT_INTERNAL, error.what()};
    }
    waiting = false;
  });
  // Nothing may leave this scope with the waiter joinable (std::terminate): what a call
  // throws is kept, the job cancelled, the waiter joined, then it is thrown again for the
  // suite to judge (an entry beyond an older table is a skip, anything else a failure).
  std::string slow;
  std::exception_ptr thrown;
  try {
    for (int i = 0; i < 20; ++i) {
      const auto begin = std::chrono::steady_clock::now();
      (void)f.device.status();
      (void)f.calbin.kv_capacity();
      const auto took = std::chrono::steady_clock::now() - begin;
      if (took > std::chrono::seconds(1) && slow.empty()) {
        slow = fmt::format("a Device_Status took {} ms while another thread waited",
                           std::chrono::duration_cast<milliseconds>(took).count());
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
  } catch (...) {
    thrown = std::current_exception();
  }
  try {
    job.cancel();
  } catch (...) {
    if (!thrown) thrown = std::current_exception();
  }
  waiter.join();  // bounded: its Job_Wait has a 2 s timeout
  if (thrown) std::rethrow_exception(thrown);
  require(slow.empty(), slow);
  require(waited.ok(),
          "the waiter's Job_Wait failed: " + calrt::code_name(waited.code) + " " + waited.message);
  if (result == CALRT_WAIT_READY) {
    require(job.status().state == calrt::JobState::cancelled,
            "the waiter returned READY but the job is not CANCELLED");
  }
  require(job.wait(kClauseWait) == calrt::WaitResult::ready &&
              job.status().state == calrt::JobState::cancelled,
          "after a cancel from another thread the job is not READY/CANCELLED");
}

}  // namespace

std::vector<Clause> clauses_thr() {
  return {
      {"THR.1", "THR", "concurrent calls are serialised", thr_concurrent},
      {"THR.2", "THR", "no call blocks past its deadline", thr_no_blocking},
  };
}

}  // namespace runner
