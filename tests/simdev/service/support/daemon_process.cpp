#include "daemon_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
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
  const auto given = [&](const char* flag) {
    return std::find(args.begin(), args.end(), flag) != args.end();
  };
  // --tcp needs a token: one is written for the test, and the test process's clients (and
  // the commands it starts) find it through CALRT_TOKEN_FILE.
  if (given("--tcp") && !given("--token-file")) {
    token_ = "calrt-test-token-0123456789abcdef";
    token_file_ = dir / "token";
    {
      std::ofstream out(token_file_, std::ios::trunc);
      out << token_ << "\n";
    }
    std::filesystem::permissions(
        token_file_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    args.insert(args.end(), {"--token-file", token_file_.string()});
    ::setenv("CALRT_TOKEN_FILE", token_file_.c_str(), 1);
  }
  // The tests run as root in CI containers; the daemon asks for that to be said.
  if (::geteuid() == 0 && !given("--allow-root")) args.emplace_back("--allow-root");
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
  reader_ = std::thread([this] { read_output(); });

  const auto deadline = Clock::now() + options.ready_timeout;
  while (Clock::now() < deadline) {
    const std::string seen = output();
    const size_t at = seen.find("listening on unix:");
    if (at != std::string::npos && seen.find('\n', at) != std::string::npos) {
      const size_t tcp = seen.find("listening on tcp:");
      if (tcp == std::string::npos) return;
      const size_t end = seen.find('\n', tcp);
      if (end != std::string::npos) {
        tcp_endpoint_ = seen.substr(tcp + 13, end - tcp - 13);
        return;
      }
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the last bytes
      const std::string last = output();
      stop_reader_ = true;
      reader_.join();
      close(out_fd_);
      throw std::runtime_error("simdev serve exited before listening:\n" + last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string seen = output();
  kill_now();
  stop_reader_ = true;
  reader_.join();
  close(out_fd_);
  throw std::runtime_error("simdev serve did not listen in time:\n" + seen);
}

DaemonProcess::~DaemonProcess() {
  kill_now();
  stop_reader_ = true;
  if (reader_.joinable()) reader_.join();
  if (out_fd_ >= 0) close(out_fd_);
}

// Until EOF (every writer gone) or the stop flag; the poll timeout bounds how long the flag
// waits to be seen.
void DaemonProcess::read_output() {
  char chunk[4096];
  while (!stop_reader_) {
    pollfd p{out_fd_, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    const ssize_t got = read(out_fd_, chunk, sizeof chunk);
    if (got > 0) {
      const std::lock_guard lock(output_mutex_);
      output_.append(chunk, static_cast<size_t>(got));
    } else if (got == 0) {
      reader_at_eof_ = true;
      return;
    }
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
  finish_reading();
  return status;
}

void DaemonProcess::finish_reading() {
  // The daemon's last line (its summary) may still be in the pipe when it is reaped.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!reader_at_eof_ && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void DaemonProcess::stop() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}
void DaemonProcess::resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

std::string DaemonProcess::output() const {
  const std::lock_guard lock(output_mutex_);
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
