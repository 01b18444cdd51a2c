#include "daemon_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <thread>

namespace calrt_test {
namespace {

using Clock = std::chrono::steady_clock;

bool reap(pid_t pid, int* status, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || r < 0) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

DaemonProcess::DaemonProcess(const std::filesystem::path& dir, DaemonOptions options)
    : socket_(dir / "calrt.sock") {
  std::filesystem::create_directories(dir);
  std::filesystem::remove(socket_);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  std::vector<std::string> args = {SIMDEV_EXE, "serve", "--socket", socket_.string()};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  out_fd_ = pipe_fds[0];
  fcntl(out_fd_, F_SETFL, O_NONBLOCK);

  const auto deadline = Clock::now() + options.ready_timeout;
  while (Clock::now() < deadline) {
    drain(std::chrono::milliseconds(50));
    const size_t at = output_.find("listening on unix:");
    if (at != std::string::npos && output_.find('\n', at) != std::string::npos) {
      const size_t tcp = output_.find("listening on tcp:");
      if (tcp != std::string::npos) {
        const size_t end = output_.find('\n', tcp);
        if (end == std::string::npos) continue;
        tcp_endpoint_ = output_.substr(tcp + 13, end - tcp - 13);
      }
      return;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      drain(std::chrono::milliseconds(0));
      throw std::runtime_error("simdev serve exited before listening:\n" + output_);
    }
  }
  const std::string seen = output_;
  kill_now();
  throw std::runtime_error("simdev serve did not listen in time:\n" + seen);
}

DaemonProcess::~DaemonProcess() {
  kill_now();
  if (out_fd_ >= 0) close(out_fd_);
}

void DaemonProcess::drain(std::chrono::milliseconds budget) {
  if (out_fd_ < 0) return;
  pollfd p{out_fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(budget.count())) <= 0) return;
  char chunk[4096];
  ssize_t got = 0;
  while ((got = read(out_fd_, chunk, sizeof chunk)) > 0) {
    output_.append(chunk, static_cast<size_t>(got));
  }
}

void DaemonProcess::kill_now() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGKILL);
  int status = 0;
  reap(pid_, &status, std::chrono::milliseconds(10000));
  pid_ = -1;
}

int DaemonProcess::terminate(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  if (!reap(pid_, &status, timeout)) {
    kill_now();
    return -1;
  }
  pid_ = -1;
  return status;
}

void DaemonProcess::stop() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}
void DaemonProcess::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string DaemonProcess::output() {
  drain(std::chrono::milliseconds(0));
  return output_;
}

size_t DaemonProcess::open_fds() const {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid_) + "/fd")) {
    ++n;
  }
  return n;
}

size_t DaemonProcess::rss_bytes() const {
  std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      size_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    std::string rest;
    std::getline(status, rest);
  }
  return 0;
}

}  // namespace calrt_test
