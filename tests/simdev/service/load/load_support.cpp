#include "load_support.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include <exception>
#include <mutex>
#include <stdexcept>

#include "abi/calrt_loader.hpp"
#include "runner/core/session.hpp"
#include "runner/smoke/golden_case.hpp"
#include "simdev/service/client/client_api.h"

namespace calrt_load {

size_t GoldenInputs::case_index(const std::string& name) const {
  for (size_t i = 0; i < case_count(); ++i) {
    if (golden_case(i).name == name) return i;
  }
  throw std::runtime_error("golden case " + name + " is not among the selected cases");
}

const GoldenInputs& golden_inputs() {
  static std::once_flag once;
  static GoldenInputs golden;
  static std::string error;
  std::call_once(once, [] {
    golden.options.calbin = CALRT_TEST_CALBIN;
    golden.options.cases = "short";
    auto inputs = runner::load_host_inputs(golden.options);
    if (!inputs) {
      error = inputs.error();
      return;
    }
    golden.inputs = std::move(*inputs);
  });
  if (!error.empty()) throw std::runtime_error("golden inputs: " + error);
  return golden;
}

calrt::Api client_api(const std::string& endpoint) {
  const CalrtApi* table = calrt_client_get_api(CALRT_ABI_MAJOR, endpoint.c_str());
  calrt::validate_table(table, CALRT_ABI_MAJOR, "calrt_client " + endpoint);
  return calrt::Api(table);
}

namespace {

// spdlog creates its registry on first use, inside libspdlog.so, whose static-initialisation
// guard ThreadSanitizer cannot see: first uses on two client threads at once read as a race.
// Creating it here, on the main thread before main, orders it before every client thread.
[[maybe_unused]] const bool g_logger_ready = spdlog::default_logger_raw() != nullptr;

void take_failures(const runner::StepResult& step, ClientOutcome& out) {
  for (const std::string& failure : step.failures) {
    out.failures.push_back(fmt::format("step {} ({}): {}", step.number, step.name, failure));
  }
}

// The smoke's verdict on one case (smoke_golden.cpp judges the same facts over all cases).
void judge_case(const runner::CaseResult& r, const runner::Thresholds& t, ClientOutcome& out) {
  for (const auto& phase : r.failures) {
    out.failures.insert(out.failures.end(), phase.begin(), phase.end());
  }
  if (r.prefill.compared == 0) out.failures.push_back("no prefill row was compared");
  if (r.decode.compared != r.decode_steps) {
    out.failures.push_back(fmt::format("{} of {} teacher-forced decode rows compared",
                                       r.decode.compared, r.decode_steps));
  }
  // The greedy rate is not gated here: the smoke judges it over all cases, and one argmax
  // swap among a single case's nine comparisons is within W8A8 noise; cosine and top-k above
  // are gated per comparison and catch crosstalk.
  (void)t;
  if (!r.deterministic) out.failures.push_back("the second prefill differs from the first");
}

}  // namespace

ClientOutcome run_golden_client(const calrt::Api& api, const GoldenInputs& golden,
                                size_t case_index) {
  ClientOutcome out;
  out.started = Clock::now();
  try {
    const calbin::GoldenCase& golden_case = golden.golden_case(case_index);
    out.case_name = golden_case.name;
    out.prompt_len = golden_case.prompt_len;
    runner::Session session(golden.options);
    session.inputs = golden.inputs;
    session.api = api;
    for (auto* step : {&runner::step_device, &runner::step_calbin, &runner::step_configure,
                       &runner::step_buffers}) {
      const runner::StepResult result = step(session);
      take_failures(result, out);
      if (!result.passed()) {
        out.finished = Clock::now();
        return out;
      }
    }
    const runner::CaseResult result =
        runner::run_golden_case(session, session.inputs.golden_case(case_index));
    out.submissions = result.submissions;
    judge_case(result, golden.options.thresholds, out);
  } catch (const std::exception& error) {
    out.failures.push_back(std::string("exception: ") + error.what());
  }
  out.finished = Clock::now();
  return out;
}

}  // namespace calrt_load

namespace calrt_load {

ScratchDir::ScratchDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "calrt-load-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

ChildProcess::ChildProcess(std::vector<std::string> argv) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  out_fd_ = pipe_fds[0];
  fcntl(out_fd_, F_SETFL, O_NONBLOCK);
}

ChildProcess::~ChildProcess() {
  kill_now();
  if (out_fd_ >= 0) close(out_fd_);
}

void ChildProcess::drain(std::chrono::milliseconds budget) {
  pollfd p{out_fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(budget.count())) <= 0) return;
  char chunk[4096];
  ssize_t got = 0;
  while ((got = read(out_fd_, chunk, sizeof chunk)) > 0) {
    output_.append(chunk, static_cast<size_t>(got));
  }
}

bool ChildProcess::wait_for_output(const std::string& needle, std::chrono::milliseconds budget) {
  const auto deadline = Clock::now() + budget;
  while (output_.find(needle) == std::string::npos) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    drain(std::min(left, std::chrono::milliseconds(50)));
    if (output_.find(needle) == std::string::npos && wait_exit(std::chrono::milliseconds(0))) {
      drain(std::chrono::milliseconds(0));
      return output_.find(needle) != std::string::npos;
    }
  }
  return true;
}

std::optional<int> ChildProcess::wait_exit(std::chrono::milliseconds budget) {
  if (status_ || pid_ <= 0) return status_;
  const auto deadline = Clock::now() + budget;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      status_ = status;
      return status_;
    }
    if (r < 0 || Clock::now() >= deadline) return std::nullopt;
    drain(std::chrono::milliseconds(5));
  }
}

void ChildProcess::kill_now() {
  if (pid_ <= 0 || status_) return;
  ::kill(pid_, SIGKILL);
  wait_exit(std::chrono::milliseconds(10000));
}

std::string ChildProcess::output() {
  drain(std::chrono::milliseconds(0));
  return output_;
}

}  // namespace calrt_load
