// A `simdev serve` daemon as a child process for tests: started on a private socket in a
// scratch directory, ready once it prints its listening line, killed (or stopped, or left to
// exit) on request. Every wait is bounded; a daemon that does not come up is a test failure
// with its output, never a hang. A reader thread drains the daemon's output all the time: a
// daemon that logs every session would otherwise fill the pipe after a few hundred sessions
// and block in its logger.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace calrt_test {

struct DaemonOptions {
  std::vector<std::string> extra_args;  // e.g. {"--tcp", "0", "--max-clients", "4"}
  std::chrono::milliseconds ready_timeout{20000};
};

class DaemonProcess {
 public:
  // Starts `simdev serve --socket DIR/calrt.sock ...` (simdev at SIMDEV_EXE). Throws
  // std::runtime_error with the daemon's output when it is not listening in time.
  explicit DaemonProcess(const std::filesystem::path& dir, DaemonOptions options = {});
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  const std::filesystem::path& socket() const { return socket_; }
  std::string endpoint() const { return "unix:" + socket_.string(); }
  // The `tcp:127.0.0.1:PORT` endpoint when started with --tcp; empty otherwise.
  const std::string& tcp_endpoint() const { return tcp_endpoint_; }
  pid_t pid() const { return pid_; }
  // With --tcp (and no --token-file given): the token written for it, and its file.
  const std::string& token() const { return token_; }
  const std::filesystem::path& token_file() const { return token_file_; }

  // SIGKILL and reap (bounded). Idempotent.
  void kill_now();
  // SIGTERM, then reap within `timeout`; returns the exit status as from waitpid (or -1
  // when it had to be killed).
  int terminate(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  // SIGSTOP / SIGCONT: a daemon that hangs without closing its sockets.
  void stop();
  void resume();
  // Everything the daemon printed so far (stdout and stderr).
  std::string output() const;

  // The daemon's open file descriptors and resident memory, read from /proc.
  size_t open_fds() const;
  size_t rss_bytes() const;

 private:
  void read_output();

  std::filesystem::path socket_;
  std::string tcp_endpoint_;
  std::string token_;
  std::filesystem::path token_file_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  mutable std::mutex output_mutex_;
  std::string output_;
  std::atomic<bool> stop_reader_{false};
  std::atomic<bool> reader_at_eof_{false};
  // After the daemon has exited: lets the reader drain what is left in the pipe (bounded).
  void finish_reading();
  std::thread reader_;
};

}  // namespace calrt_test
