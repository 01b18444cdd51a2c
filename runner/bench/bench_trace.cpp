#include "runner/bench/bench_trace.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "runner/core/report/chrome_trace.hpp"

namespace runner {
namespace {

constexpr int kDevicePid = 1;
constexpr int kHostPid = 2;
constexpr int kHostTid = 1;
constexpr int kRunsTid = 2;
constexpr int kH2dTid = 101;
constexpr int kD2hTid = 102;
constexpr int kD2dTid = 103;
// One queue track per buffer slot: in parallel mode the ping and pong jobs wait at the same
// time, and Perfetto drops complete events that overlap on one track without nesting.
constexpr int kQueueTid = 110;  // + slot
constexpr int kOtherTid = 199;

int chip_tid(uint32_t chip) { return 1 + static_cast<int>(chip); }

int track_tid(const calrt::TraceEvent& event) {
  switch (event.track) {
    case calrt::TraceTrack::chip:
      return chip_tid(event.chip);
    case calrt::TraceTrack::pcie_h2d:
      return kH2dTid;
    case calrt::TraceTrack::pcie_d2h:
      return kD2hTid;
    case calrt::TraceTrack::d2d:
      return kD2dTid;
    case calrt::TraceTrack::queue:
      return kQueueTid;  // the slot is added where the owner is known
  }
  return kOtherTid;  // a track a newer runtime added
}

const char* kind_name(calrt::TraceKind kind) {
  switch (kind) {
    case calrt::TraceKind::queued:
      return "queued";
    case calrt::TraceKind::h2d:
      return "h2d";
    case calrt::TraceKind::compute:
      return "compute";
    case calrt::TraceKind::d2d:
      return "d2d";
    case calrt::TraceKind::d2h:
      return "d2h";
  }
  return "other";
}

std::string event_name(const calrt::TraceEvent& event) {
  switch (event.kind) {
    case calrt::TraceKind::queued:
      return "queued";
    case calrt::TraceKind::h2d:
      return "H2D";
    case calrt::TraceKind::d2h:
      return "D2H";
    case calrt::TraceKind::d2d:
      return event.label.empty() ? "D2D" : "D2D " + event.label;
    case calrt::TraceKind::compute:
      break;
  }
  return event.label.empty() ? kind_name(event.kind) : event.label;
}

struct JobOwner {
  const ModeRecord* mode = nullptr;
  const JobRecord* job = nullptr;
};

// Which of the bench's jobs each device job serial is. The contract numbers jobs from 1 per
// device in submission order, but a runtime may number them otherwise (the simulator shares
// one serial counter among all its objects), so serials are matched by time instead: a
// job's earliest event begins at its Job_Status submit time (QUEUED) or, when the device
// recorded no QUEUED event for it, at its start time (H2D). Ties go in submission order.
struct SerialMap {
  std::unordered_map<uint64_t, JobOwner> owner_of_serial;
  std::unordered_map<uint64_t, uint64_t> serial_of_submission;
  size_t unmatched = 0;
};

SerialMap match_serials(const std::vector<calrt::TraceEvent>& events,
                        const std::vector<ModeRecord>& modes) {
  std::map<uint64_t, int64_t> first_begin;  // by serial, ascending
  for (const calrt::TraceEvent& event : events) {
    const auto [at, inserted] = first_begin.emplace(event.job_serial, event.begin.count());
    if (!inserted) {
      at->second = std::min(at->second, event.begin.count());
    }
  }
  std::multimap<int64_t, JobOwner> by_submit;
  std::multimap<int64_t, JobOwner> by_start;
  for (const ModeRecord& mode : modes) {
    for (const JobRecord& job : mode.jobs) {
      by_submit.emplace(job.submit, JobOwner{&mode, &job});
      by_start.emplace(job.start, JobOwner{&mode, &job});
    }
  }
  SerialMap map;
  std::set<uint64_t> taken;  // submissions already matched
  auto take = [&](const std::multimap<int64_t, JobOwner>& index, uint64_t serial, int64_t time) {
    const auto [first, last] = index.equal_range(time);
    for (auto at = first; at != last; ++at) {
      if (taken.insert(at->second.job->submission).second) {
        map.owner_of_serial[serial] = at->second;
        map.serial_of_submission[at->second.job->submission] = serial;
        return true;
      }
    }
    return false;
  };
  for (const auto& [serial, begin] : first_begin) {
    if (!take(by_submit, serial, begin) && !take(by_start, serial, begin)) {
      ++map.unmatched;
    }
  }
  return map;
}

void add_owner_args(std::vector<ChromeTrace::Arg>& args, const JobOwner& owner) {
  if (owner.job == nullptr) {
    return;
  }
  const JobRecord& job = *owner.job;
  args.push_back(ChromeTrace::arg("submission", job.submission));
  args.push_back(ChromeTrace::arg("mode", owner.mode->mode));
  args.push_back(ChromeTrace::arg("run", job.run.label()));
  args.push_back(ChromeTrace::arg("request", uint64_t{job.seq}));
  args.push_back(ChromeTrace::arg("model", to_string(job.kind)));
  args.push_back(
      ChromeTrace::arg(job.kind == JobKind::prefill ? "chunk" : "step", uint64_t{job.index}));
  args.push_back(ChromeTrace::arg("slot", uint64_t{job.slot}));
}

}  // namespace

std::string bench_chrome_trace(const std::vector<calrt::TraceEvent>& device_events,
                               const std::vector<ModeRecord>& modes, uint32_t chip_count,
                               bool warmup, BenchTraceCounts* counts) {
  const SerialMap serials = match_serials(device_events, modes);
  uint32_t chips = chip_count;
  bool other_track = false;
  for (const calrt::TraceEvent& event : device_events) {
    if (event.track == calrt::TraceTrack::chip) {
      chips = std::max(chips, event.chip + 1);
    }
    other_track = other_track || track_tid(event) == kOtherTid;
  }

  ChromeTrace trace;
  trace.process(kDevicePid, "device", 0);
  for (uint32_t chip = 0; chip < chips; ++chip) {
    trace.thread(kDevicePid, chip_tid(chip), "chip " + std::to_string(chip),
                 static_cast<int>(chip));
  }
  trace.thread(kDevicePid, kH2dTid, "PCIe H2D", 100);
  trace.thread(kDevicePid, kD2hTid, "PCIe D2H", 101);
  trace.thread(kDevicePid, kD2dTid, "D2D", 102);
  uint32_t slots = 1;
  for (const ModeRecord& mode : modes) slots = std::max(slots, mode.slots);
  for (uint32_t slot = 0; slot < slots; ++slot) {
    trace.thread(kDevicePid, kQueueTid + static_cast<int>(slot),
                 "queue slot " + std::to_string(slot), 103 + static_cast<int>(slot));
  }
  if (other_track) {
    trace.thread(kDevicePid, kOtherTid, "other", 199);
  }
  trace.process(kHostPid, "host", 1);
  trace.thread(kHostPid, kHostTid, "host", 0);
  trace.thread(kHostPid, kRunsTid, "runs", 1);

  for (const calrt::TraceEvent& event : device_events) {
    std::vector<ChromeTrace::Arg> args;
    args.push_back(ChromeTrace::arg("job", event.job_serial));
    if (event.track == calrt::TraceTrack::chip) {
      args.push_back(ChromeTrace::arg("chip", uint64_t{event.chip}));
    }
    if (event.layer >= 0) {
      args.push_back(ChromeTrace::arg("layer", int64_t{event.layer}));
    }
    args.push_back(ChromeTrace::arg("bytes", event.bytes));
    if (event.kind == calrt::TraceKind::compute) {
      args.push_back(ChromeTrace::arg("flops", event.flops));
    }
    const auto owner = serials.owner_of_serial.find(event.job_serial);
    const JobOwner job = owner == serials.owner_of_serial.end() ? JobOwner{} : owner->second;
    add_owner_args(args, job);
    int tid = track_tid(event);
    if (tid == kQueueTid && job.job != nullptr) tid += static_cast<int>(job.job->slot);
    trace.complete(kDevicePid, tid, event_name(event), kind_name(event.kind), event.begin.count(),
                   (event.end - event.begin).count(), args);
  }
  const size_t device_count = trace.complete_events();

  for (const ModeRecord& mode : modes) {
    for (const HostSpanRecord& span : mode.host) {
      if (span.run.warmup && !warmup) continue;
      std::vector<ChromeTrace::Arg> args;
      const auto serial = serials.serial_of_submission.find(span.submission);
      if (serial != serials.serial_of_submission.end()) {
        args.push_back(ChromeTrace::arg("job", serial->second));
      }
      args.push_back(ChromeTrace::arg("submission", span.submission));
      args.push_back(ChromeTrace::arg("mode", mode.mode));
      args.push_back(ChromeTrace::arg("run", span.run.label()));
      args.push_back(ChromeTrace::arg("request", uint64_t{span.seq}));
      trace.complete(kHostPid, kHostTid, span.name, "host", span.begin, span.end - span.begin,
                     args);
    }
    for (const RunRecord& run : mode.runs) {
      if (run.run.warmup && !warmup) continue;
      trace.complete(kHostPid, kRunsTid, mode.mode + " " + run.run.label(), "run", run.begin,
                     run.end - run.begin,
                     {ChromeTrace::arg("mode", mode.mode), ChromeTrace::arg("run", run.run.label()),
                      ChromeTrace::arg("warmup", run.run.warmup),
                      ChromeTrace::arg("jobs", run.jobs), ChromeTrace::arg("tokens", run.tokens)});
    }
  }
  if (counts != nullptr) {
    counts->device_events = device_count;
    counts->host_events = trace.complete_events() - device_count;
    counts->unmatched_job_serials = serials.unmatched;
  }
  return trace.to_json();
}

}  // namespace runner
