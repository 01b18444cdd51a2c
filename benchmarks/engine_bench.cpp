// Throughput of the simulator's discrete-event engine (simdev/device/base/engine.hpp) on a
// synthetic workload, PHOLD, the classic benchmark of discrete-event simulators: a fixed
// population of events, each of which schedules one successor at now + a delay drawn from a
// seeded generator, so the queue holds the population at every instant and every event costs
// one schedule and one pop. The population is the queue depth: the device keeps a few events
// per job and stage in flight (4 - 64), a campaign of many jobs more.
//
//   BM_EnginePhold/depth:N   events per second (items_per_second) through Engine::run_until,
//                            its done() test after every event included
//   BM_EventQueue/depth:N    the queue alone: schedule + pop, no engine loop
//
// Before timing, each run is checked against itself: two engines on the same seed fire the
// same events in the same order (an order digest), and time never goes backwards; a mismatch
// makes the benchmark fail, and the executable exit 1 (checked_main.hpp).
#include <benchmark/benchmark.h>

#include <cstdint>

#include "benchmarks/checked_main.hpp"
#include "calbin/splitmix64.hpp"
#include "simdev/device/base/engine.hpp"

namespace {

using simdev::Band;
using simdev::Engine;
using simdev::TimePs;

// A stateless generator per event (SplitMix64 of a counter): deterministic, and cheap next
// to the event it times.
constexpr uint64_t mix(uint64_t x) { return calbin::splitmix64(x); }

struct Phold {
  Engine engine;
  uint64_t fired = 0;
  uint64_t digest = 0;  // order of firing: (time, id) folded in
  TimePs last = 0;
  bool backwards = false;
  bool failed = false;

  // Schedules event `id`'s next firing: 1 ns to 1 us ahead, in one of the four bands.
  void schedule(uint64_t id) {
    const uint64_t r = mix(id ^ (fired << 20));
    const TimePs delay = 1000 + (r % 1'000'000);
    auto key = engine.after(delay, static_cast<Band>(r >> 62), [this, id] { fire(id); });
    failed |= !key;
  }

  void fire(uint64_t id) {
    const TimePs now = engine.now();
    backwards |= now < last;
    last = now;
    digest = mix(digest ^ now ^ (id << 48));
    ++fired;
    schedule(id);
  }

  void seed(uint64_t depth) {
    for (uint64_t id = 0; id < depth; ++id) schedule(id);
  }

  // Runs until `count` more events have fired.
  bool run(uint64_t count) {
    const uint64_t until = fired + count;
    auto ran = engine.run_until(simdev::kTimeNever, [&] { return fired >= until; });
    return ran && !failed && fired == until;
  }
};

void BM_EnginePhold(benchmark::State& state) {
  const auto depth = static_cast<uint64_t>(state.range(0));
  constexpr uint64_t kBatch = 100'000;
  {
    // Determinism: two engines on the same workload agree event for event.
    Phold a;
    Phold b;
    a.seed(depth);
    b.seed(depth);
    if (!a.run(kBatch) || !b.run(kBatch) || a.digest != b.digest || a.backwards) {
      state.SkipWithError("PHOLD runs differ, went backwards in time, or failed to schedule");
      return;
    }
  }
  Phold phold;
  phold.seed(depth);
  for (auto _ : state) {
    if (!phold.run(kBatch)) {
      state.SkipWithError("run_until failed");
      return;
    }
  }
  if (phold.backwards) {
    state.SkipWithError("device time went backwards");
  }
  state.SetItemsProcessed(static_cast<int64_t>(phold.fired));
}
BENCHMARK(BM_EnginePhold)->ArgName("depth")->Arg(4)->Arg(64)->Arg(1024);

void BM_EventQueue(benchmark::State& state) {
  const auto depth = static_cast<uint64_t>(state.range(0));
  simdev::EventQueue queue;
  uint64_t sequence = 0;
  for (uint64_t i = 0; i < depth; ++i) {
    (void)queue.schedule(mix(i) % 1'000'000, Band::kHost, [] {});
  }
  for (auto _ : state) {
    auto event = queue.pop();
    const TimePs at = event->first.time_ps + 1000 + mix(++sequence) % 1'000'000;
    auto key = queue.schedule(at, Band::kHost, std::move(event->second));
    benchmark::DoNotOptimize(key);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_EventQueue)->ArgName("depth")->Arg(4)->Arg(64)->Arg(1024);

}  // namespace

int main(int argc, char** argv) { return calrt_bench::checked_main(argc, argv); }
