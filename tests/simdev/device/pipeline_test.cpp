// The device's job pipeline (input DMA, compute, output DMA), its profiling timestamps,
// buffer-reuse detection, the clock and trace extensions, and paced mode, all through the
// C++ wrapper over the in-process simulator.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.hpp"
#include "simdev/runtime/sim_api.h"
#include "tests/simdev/device/sim_session.hpp"

namespace {

using namespace std::chrono_literals;

calrt::Api sim_api() { return calrt::Api(calrt_sim_get_api(CALRT_ABI_MAJOR)); }

// One decode-capable sequence on one slot: its buffers and KV handle.
struct Lane {
  calrt::Buffer input;
  calrt::Buffer output;
  calrt::Kv kv;
  uint64_t past = 0;
};

// A device with the tiny calbin configured.
class Rig {
 public:
  explicit Rig(const std::string& config = "", bool parallel = false)
      : device(calrt::Device::create(sim_api(), calrt::DeviceKind::sim, 0, config)) {
    if (parallel) {
      device.set_parallel_mode(true);
    }
    calbin = calrt::Calbin::create(device, simdev::test::tiny_calbin());
    calbin.configure();
    const calrt::CalbinInfo info = calbin.info();
    for (uint32_t i = 0; i < info.model_count; ++i) {
      calrt::ModelDesc model = calbin.model(i);
      if (model.type == calrt::ModelType::decode) {
        decode = model;
      }
    }
    vocab = info.vocab;
  }

  Lane lane(uint32_t slot, uint32_t kv_tokens = 64) {
    Lane lane;
    lane.input = calrt::Buffer::create(calbin, decode.name, calrt::Direction::input, slot);
    lane.output = calrt::Buffer::create(calbin, decode.name, calrt::Direction::output, slot);
    lane.kv = calrt::Kv::allocate(calbin, kv_tokens);
    lane.kv.apply(lane.input);
    return lane;
  }

  // Writes one decode step's token/position and CSRs into the lane's input.
  void fill(Lane& lane, int32_t token) {
    for (const calrt::TensorDesc& tensor : decode.inputs) {
      calrt::Mapping mapping = lane.input.map(tensor.index);
      auto values = mapping.as<int32_t>();
      std::fill(values.begin(), values.end(), 0);
      values[0] =
          tensor.role == calrt::TensorRole::position ? static_cast<int32_t>(lane.past) : token;
    }
    for (uint32_t c = 0; c < decode.csrs.size(); ++c) {
      if (decode.csrs[c].name == "cur_seq_len") {
        lane.input.set_csr(c, 1);
      } else if (decode.csrs[c].name == "past_kv_cur_seq_len") {
        lane.input.set_csr(c, lane.past);
      }
    }
  }

  calrt::Job submit(Lane& lane, int32_t token) {
    fill(lane, token);
    calrt::Job job = calrt::Job::submit(calbin, decode.name, lane.input, lane.output);
    ++lane.past;
    return job;
  }

  std::vector<uint16_t> logits(Lane& lane) {
    calrt::Mapping mapping = lane.output.map(0);
    auto raw = mapping.as<uint16_t>();
    return {raw.begin(), raw.end()};
  }

  calrt::Device device;
  calrt::Calbin calbin;
  calrt::ModelDesc decode;
  uint32_t vocab = 0;
};

TEST(Pipeline, ProfilingTimestampsAreOrdered) {
  Rig rig;
  Lane lane = rig.lane(0);
  calrt::Job job = rig.submit(lane, 7);
  ASSERT_EQ(job.wait(), calrt::WaitResult::ready);
  const calrt::JobStatus s = job.status();
  ASSERT_EQ(s.state, calrt::JobState::completed) << s.message;
  EXPECT_LT(s.submit_time, s.start_time);  // the submission overhead comes first
  EXPECT_LT(s.start_time, s.h2d_end_time);
  EXPECT_LE(s.h2d_end_time, s.compute_start_time);  // alone on the device: no wait for chips
  EXPECT_LT(s.compute_start_time, s.compute_end_time);
  EXPECT_LT(s.compute_end_time, s.end_time);
}

TEST(Pipeline, ParallelSlotsOverlapInputDmaWithCompute) {
  Rig rig("", /*parallel=*/true);
  Lane a = rig.lane(0);
  Lane b = rig.lane(1);
  calrt::Job ja = rig.submit(a, 7);
  calrt::Job jb = rig.submit(b, 9);
  ASSERT_EQ(jb.wait(), calrt::WaitResult::ready);
  ASSERT_EQ(ja.wait(), calrt::WaitResult::ready);
  const calrt::JobStatus sa = ja.status();
  const calrt::JobStatus sb = jb.status();
  ASSERT_EQ(sa.state, calrt::JobState::completed) << sa.message;
  ASSERT_EQ(sb.state, calrt::JobState::completed) << sb.message;
  // b's input crossed the link while a computed, and b computed only after a.
  EXPECT_LE(sb.start_time, sa.compute_end_time);
  EXPECT_GE(sb.h2d_end_time, sa.h2d_end_time);
  EXPECT_GT(sb.compute_end_time, sa.compute_end_time);
  EXPECT_GE(sb.compute_start_time, sa.compute_end_time);  // the chips take one job at a time
  EXPECT_GT(sb.compute_start_time, sb.h2d_end_time);      // b's inputs waited for the chips
  // Both together take less than back to back.
  const auto alone = (sa.end_time - sa.start_time) + (sb.end_time - sb.start_time);
  EXPECT_LT(sb.end_time - sa.start_time, alone);
}

TEST(Pipeline, ParallelAndSyncGiveIdenticalLogits) {
  auto run = [](bool parallel) {
    Rig rig("", parallel);
    Lane a = rig.lane(0);
    Lane b = rig.lane(parallel ? 1 : 0);
    std::vector<std::vector<uint16_t>> out;
    for (int step = 0; step < 3; ++step) {
      if (parallel) {
        calrt::Job ja = rig.submit(a, 11 + step);
        calrt::Job jb = rig.submit(b, 23 + step);
        EXPECT_EQ(ja.wait(), calrt::WaitResult::ready);
        EXPECT_EQ(jb.wait(), calrt::WaitResult::ready);
      } else {
        calrt::Job ja = rig.submit(a, 11 + step);
        EXPECT_EQ(ja.wait(), calrt::WaitResult::ready);
        out.push_back(rig.logits(a));
        // The sync lane b shares slot 0 with a: distinct buffers, one job at a time.
        calrt::Job jb = rig.submit(b, 23 + step);
        EXPECT_EQ(jb.wait(), calrt::WaitResult::ready);
        out.push_back(rig.logits(b));
        continue;
      }
      out.push_back(rig.logits(a));
      out.push_back(rig.logits(b));
    }
    return out;
  };
  const auto sync = run(false);
  const auto parallel = run(true);
  ASSERT_EQ(sync.size(), parallel.size());
  for (size_t i = 0; i < sync.size(); ++i) {
    EXPECT_EQ(sync[i], parallel[i]) << "step result " << i;
  }
}

TEST(Pipeline, MappingAnInFlightBufferIsBusy) {
  Rig rig;
  Lane lane = rig.lane(0);
  calrt::Job job = rig.submit(lane, 7);
  try {
    lane.input.map(0);
    FAIL() << "map of an in-flight input succeeded";
  } catch (const calrt::Error& e) {
    EXPECT_EQ(e.code(), CALRT_BUSY);
    EXPECT_NE(std::string(e.what()).find("buffer-reuse"), std::string::npos) << e.what();
  }
  ASSERT_EQ(job.wait(), calrt::WaitResult::ready);
}

TEST(Pipeline, HostWriteThroughStaleInputMappingFailsTheJob) {
  Rig rig;
  Lane lane = rig.lane(0);
  rig.fill(lane, 7);
  int32_t* stale = nullptr;
  {
    calrt::Mapping mapping = lane.input.map(0);
    stale = mapping.as<int32_t>().data();
  }
  calrt::Job job = calrt::Job::submit(rig.calbin, rig.decode.name, lane.input, lane.output);
  stale[0] = 8;  // the bug: the host reuses a buffer its in-flight job owns
  ASSERT_EQ(job.wait(), calrt::WaitResult::ready);
  const calrt::JobStatus s = job.status();
  EXPECT_EQ(s.state, calrt::JobState::failed);
  EXPECT_EQ(s.code, CALRT_BUFFER_REUSE) << s.message;
  EXPECT_NE(s.message.find("buffer reuse"), std::string::npos) << s.message;
}

TEST(Pipeline, HostWriteThroughStaleOutputMappingFailsTheJob) {
  Rig rig;
  Lane lane = rig.lane(0);
  uint16_t* stale = nullptr;
  {
    calrt::Mapping mapping = lane.output.map(0);
    stale = mapping.as<uint16_t>().data();
  }
  rig.fill(lane, 7);
  calrt::Job job = calrt::Job::submit(rig.calbin, rig.decode.name, lane.input, lane.output);
  stale[3] = 0x3f80;
  ASSERT_EQ(job.wait(), calrt::WaitResult::ready);
  EXPECT_EQ(job.status().code, CALRT_BUFFER_REUSE) << job.status().message;
}

TEST(ClockExtension, HostSpendAdvancesVirtualTimeExactlyAndRunsTheDevice) {
  Rig rig;
  auto clock = calrt::DeviceClock::of(rig.device);
  ASSERT_TRUE(clock);
  EXPECT_EQ(clock.mode(), calrt::ClockMode::virtual_time);
  Lane lane = rig.lane(0);
  calrt::Job job = rig.submit(lane, 7);
  const auto before = clock.now();
  clock.host_spend(1s);  // far longer than a tiny decode step
  EXPECT_EQ(clock.now() - before, std::chrono::nanoseconds(1s));
  const calrt::JobStatus s = job.status();
  EXPECT_EQ(s.state, calrt::JobState::completed);  // it ran while the host was busy
  EXPECT_LT(s.end_time, clock.now());
}

TEST(ClockExtension, InfiniteHostSpendIsRejected) {
  Rig rig;
  auto args = calrt::detail::make_args<Calrt_Clock_HostSpend_Args>();
  args.device = rig.device.get();
  args.duration_ns = CALRT_TIMEOUT_INFINITE;
  const auto* ext = reinterpret_cast<const CalrtClockExtension*>(
      calrt::find_extension(sim_api(), CALRT_EXT_CLOCK, CALRT_CLOCK_EXTENSION_STRUCT_SIZE));
  ASSERT_NE(ext, nullptr);
  const simdev::test::ApiError error = simdev::test::take(ext->Clock_HostSpend(&args));
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(error.message.find("duration_ns"), std::string::npos) << error.message;
}

std::vector<calrt::TraceEvent> traced_run(size_t steps) {
  Rig rig("", true);
  auto trace = calrt::DeviceTrace::of(rig.device);
  trace.start();
  Lane a = rig.lane(0);
  Lane b = rig.lane(1);
  for (size_t i = 0; i < steps; ++i) {
    calrt::Job ja = rig.submit(a, 3);
    calrt::Job jb = rig.submit(b, 5);
    EXPECT_EQ(jb.wait(), calrt::WaitResult::ready);
    EXPECT_EQ(ja.wait(), calrt::WaitResult::ready);
  }
  uint64_t dropped = 1;
  auto events = trace.drain(&dropped);
  EXPECT_EQ(dropped, 0u);
  return events;
}

TEST(TraceExtension, RecordsEveryTrackWithinEachJobsStages) {
  const auto events = traced_run(2);
  std::set<std::pair<calrt::TraceTrack, uint32_t>> tracks;
  for (const calrt::TraceEvent& e : events) {
    EXPECT_LE(e.begin, e.end);
    EXPECT_GE(e.job_serial, 1u);
    EXPECT_LE(e.job_serial, 4u);
    tracks.insert({e.track, e.chip});
  }
  for (auto track : {calrt::TraceTrack::pcie_h2d, calrt::TraceTrack::pcie_d2h,
                     calrt::TraceTrack::d2d, calrt::TraceTrack::queue}) {
    EXPECT_TRUE(tracks.count({track, 0})) << static_cast<int>(track);
  }
  EXPECT_TRUE(tracks.count({calrt::TraceTrack::chip, 0}));
  EXPECT_TRUE(tracks.count({calrt::TraceTrack::chip, 1}));
  // One chip never runs two segments at once.
  for (uint32_t chip : {0u, 1u}) {
    std::vector<std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds>> spans;
    for (const calrt::TraceEvent& e : events) {
      if (e.track == calrt::TraceTrack::chip && e.chip == chip) {
        spans.push_back({e.begin, e.end});
      }
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      EXPECT_LE(spans[i - 1].second, spans[i].first) << "chip " << chip << " span " << i;
    }
  }
}

TEST(TraceExtension, SameInputsGiveIdenticalTraces) {
  const auto first = traced_run(3);
  const auto second = traced_run(3);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].begin, second[i].begin) << i;
    EXPECT_EQ(first[i].end, second[i].end) << i;
    EXPECT_EQ(first[i].track, second[i].track) << i;
    EXPECT_EQ(first[i].label, second[i].label) << i;
  }
}

TEST(TraceExtension, BoundedCapacityCountsDropped) {
  Rig rig;
  auto trace = calrt::DeviceTrace::of(rig.device);
  trace.start(4);
  Lane lane = rig.lane(0);
  calrt::Job job = rig.submit(lane, 3);
  ASSERT_EQ(job.wait(), calrt::WaitResult::ready);
  uint64_t dropped = 0;
  EXPECT_EQ(trace.drain(&dropped).size(), 4u);
  EXPECT_GT(dropped, 0u);
}

TEST(TraceExtension, ReadRejectsANullArrayAndATooSmallEventSize) {
  Rig rig;
  const auto* ext = reinterpret_cast<const CalrtTraceExtension*>(
      calrt::find_extension(sim_api(), CALRT_EXT_TRACE, CALRT_TRACE_EXTENSION_STRUCT_SIZE));
  ASSERT_NE(ext, nullptr);
  CalrtTraceEvent events[2];
  auto args = calrt::detail::make_args<Calrt_Trace_Read_Args>();
  args.device = rig.device.get();
  args.events = nullptr;
  args.event_struct_size = sizeof(CalrtTraceEvent);
  args.capacity = 2;
  simdev::test::ApiError error = simdev::test::take(ext->Trace_Read(&args));
  EXPECT_EQ(error.code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(error.message.find("NULL"), std::string::npos) << error.message;
  args.events = events;
  args.event_struct_size = sizeof(CalrtTraceEvent) - 8;
  error = simdev::test::take(ext->Trace_Read(&args));
  EXPECT_EQ(error.code, CALRT_STRUCT_TOO_SMALL);
  EXPECT_NE(error.message.find("event_struct_size"), std::string::npos) << error.message;
}

TEST(TraceExtension, CapacityAboveTheLimitIsRejected) {
  Rig rig;
  try {
    calrt::DeviceTrace::of(rig.device).start(uint64_t{1} << 40);
    FAIL() << "accepted a trace capacity of 2^40 events";
  } catch (const calrt::Error& e) {
    EXPECT_EQ(e.code(), CALRT_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("capacity"), std::string::npos) << e.what();
  }
}

// Paced mode ties device time to the host's monotonic clock; these tests use generous
// bounds so that a loaded machine cannot make them flaky.
TEST(PacedClock, WaitBlocksUntilTheJobIsDueAndReportsPaced) {
  Rig rig("clock=paced");
  auto clock = calrt::DeviceClock::of(rig.device);
  EXPECT_EQ(clock.mode(), calrt::ClockMode::paced);
  Lane lane = rig.lane(0);
  calrt::Job job = rig.submit(lane, 7);
  ASSERT_EQ(job.wait(10s), calrt::WaitResult::ready);
  const calrt::JobStatus s = job.status();
  EXPECT_EQ(s.state, calrt::JobState::completed) << s.message;
  EXPECT_GE(clock.now(), s.end_time);
}

TEST(PacedClock, CancelFromAnotherThreadWakesTheWaiter) {
  Rig rig("clock=paced;submit_overhead_ns=5000000000");  // the job would start after 5 s
  Lane lane = rig.lane(0);
  calrt::Job job = rig.submit(lane, 7);
  std::thread canceller([&] {
    std::this_thread::sleep_for(50ms);
    job.cancel();
  });
  const auto begin = std::chrono::steady_clock::now();
  const calrt::WaitResult result = job.wait(30s);
  const auto waited = std::chrono::steady_clock::now() - begin;
  canceller.join();
  EXPECT_EQ(result, calrt::WaitResult::ready);
  const calrt::JobStatus status = job.status();
  EXPECT_EQ(status.state, calrt::JobState::cancelled);
  EXPECT_EQ(status.message, "job #1 was cancelled");  // composed without allocating
  EXPECT_LT(waited, 4s);  // woken by the cancel, not by the job's own time
}

TEST(PacedClock, DestroyingTheDeviceReleasesABlockedWaiter) {
  auto rig = std::make_unique<Rig>("clock=paced;submit_overhead_ns=5000000000");
  Lane lane = rig->lane(0);
  calrt::Job job = rig->submit(lane, 7);
  CalrtJob* raw_job = job.release();
  CalrtDevice* raw_device = rig->device.get();
  const calrt::Api api = sim_api();
  std::atomic<int> code{-1};
  std::thread waiter([&] {
    auto args = calrt::detail::make_args<Calrt_Job_Wait_Args>();
    args.job = raw_job;
    args.timeout_ns = 30'000'000'000;
    code = simdev::test::take(api.table()->Job_Wait(&args)).code;
  });
  std::this_thread::sleep_for(50ms);
  const auto begin = std::chrono::steady_clock::now();
  auto destroy = calrt::detail::make_args<Calrt_Device_Destroy_Args>();
  destroy.device = raw_device;
  EXPECT_EQ(simdev::test::take(api.table()->Device_Destroy(&destroy)).code, CALRT_OK);
  waiter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 4s);
  EXPECT_EQ(code.load(), CALRT_INVALID_HANDLE);
  // The wrapper objects must not release what the device already took with it.
  lane.input.release();
  lane.output.release();
  lane.kv.release();
  rig->calbin.release();
  rig->device.release();
}

}  // namespace

namespace {

// Fields appended to Calrt_Job_Status_Args later are written only where the caller's struct
// has them: a caller compiled against an older header keeps its memory untouched.
TEST(Pipeline, JobStatusServesOlderCallersWithoutWritingPastTheirStruct) {
  Rig rig;
  Lane lane = rig.lane(0);
  calrt::Job job = rig.submit(lane, 7);
  ASSERT_EQ(job.wait(), calrt::WaitResult::ready);
  constexpr uint64_t kSentinel = 0xdeadbeefcafef00dull;
  const size_t sizes[] = {CALRT_STRUCT_SIZE(Calrt_Job_Status_Args, end_time_ns),
                          CALRT_STRUCT_SIZE(Calrt_Job_Status_Args, compute_end_time_ns)};
  for (size_t size : sizes) {
    Calrt_Job_Status_Args args{};
    args.struct_size = size;
    args.job = job.get();
    args.h2d_end_time_ns = args.compute_end_time_ns = args.compute_start_time_ns = kSentinel;
    const simdev::test::ApiError error = simdev::test::take(sim_api().table()->Job_Status(&args));
    ASSERT_EQ(error.code, CALRT_OK) << error.message;
    EXPECT_GT(args.end_time_ns, 0u);
    const bool has_profiling = size > sizes[0];
    EXPECT_EQ(args.h2d_end_time_ns == kSentinel, !has_profiling) << size;
    EXPECT_EQ(args.compute_end_time_ns == kSentinel, !has_profiling) << size;
    EXPECT_EQ(args.compute_start_time_ns, kSentinel) << size;  // beyond both sizes
  }
}

}  // namespace
