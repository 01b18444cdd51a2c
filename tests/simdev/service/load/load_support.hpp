// Shared pieces of the service load tests: the golden set of the tiny calbin read once, a
// client runtime table for a daemon's endpoint, and one client's golden case over it, run
// with the runner's own smoke steps and comparison (runner/smoke/golden_case.hpp) so that the
// verdict comes from the generator's independent FP32 golden data, not from the simulator.
#pragma once

#include <sys/types.h>
#include <chrono>

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "abi/calrt.hpp"
#include "runner/core/host_inputs.hpp"
#include "runner/core/session_options.hpp"

namespace calrt_load {

using Clock = std::chrono::steady_clock;

struct GoldenInputs {
  runner::SmokeOptions options;
  runner::HostInputs inputs;

  size_t case_count() const { return inputs.case_indices.size(); }
  const calbin::GoldenCase& golden_case(size_t i) const { return inputs.golden_case(i); }
  // The index of the selected case named `name`; throws when it is not in the set.
  size_t case_index(const std::string& name) const;
};

// The tiny calbin of the test fixture (CALRT_TEST_CALBIN) and its short golden cases, read
// and verified once per process. Throws std::runtime_error naming the problem.
const GoldenInputs& golden_inputs();

// The client runtime's table for `endpoint` (calrt_client_get_api), checked. Throws.
calrt::Api client_api(const std::string& endpoint);

// What one client saw: every failure as a sentence (empty: every output matched golden),
// and when it started and finished its case.
struct ClientOutcome {
  std::string case_name;
  uint32_t prompt_len = 0;
  uint32_t submissions = 0;
  std::vector<std::string> failures;
  Clock::time_point started;
  Clock::time_point finished;

  bool passed() const { return failures.empty(); }
};

// One client end to end on its own device handle (so its own connection), calbin, buffers
// and KV: Device_Create, load, configure, buffers, then the golden case (chunked prefill
// with past_kv_cur_seq_len, teacher-forced decode against golden, Kv_Clear and a second
// prefill that must match the first bit for bit, free-running decode). Never throws.
ClientOutcome run_golden_client(const calrt::Api& api, const GoldenInputs& golden,
                                size_t case_index);

// Polls `probe` every few milliseconds until it returns true or `budget` runs out; returns
// the last result. Cleanup after a disconnect is asynchronous in the daemon, so the tests
// wait for it, boundedly.
template <class Probe>
bool eventually(Probe&& probe, std::chrono::milliseconds budget) {
  const auto deadline = Clock::now() + budget;
  while (true) {
    if (probe()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace calrt_load

namespace calrt_load {

// A private directory under the system's temporary directory, removed with its contents.
// Short, so that a socket path inside it fits sockaddr_un.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A child process with its stdout and stderr on one pipe. Every wait is bounded; the
// destructor SIGKILLs and reaps a child still running.
class ChildProcess {
 public:
  explicit ChildProcess(std::vector<std::string> argv);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads output until it holds `needle` (true) or `budget` passes or the output ends.
  bool wait_for_output(const std::string& needle, std::chrono::milliseconds budget);
  // Reaps the child within `budget`; its waitpid status, or nothing while it still runs.
  std::optional<int> wait_exit(std::chrono::milliseconds budget);
  void kill_now();
  std::string output();

 private:
  void drain(std::chrono::milliseconds budget);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::optional<int> status_;
  std::string output_;
};

}  // namespace calrt_load
