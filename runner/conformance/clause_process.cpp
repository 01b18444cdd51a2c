#include "runner/conformance/clause_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace runner {
namespace {

using ChildClock = std::chrono::steady_clock;

ChildVerdict failed(std::string reason) {
  return ChildVerdict{ChildVerdict::Kind::fail, std::move(reason)};
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// The child's report: one verdict byte, then the reason.
void report_and_exit(int fd, const ChildVerdict& verdict) {
  std::string message(1, static_cast<char>('0' + static_cast<int>(verdict.kind)));
  message += verdict.reason;
  const char* data = message.data();
  size_t left = message.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data += n;
    left -= static_cast<size_t>(n);
  }
  // _exit: no atexit handlers or static destructors of a runtime that may be broken, and
  // no second flush of stdio buffers the parent owns.
  ::_exit(0);
}

// Appends one read of the report pipe to `message`. False once the pipe has nothing more to
// give: its end, an error, or (non-blocking) no data while someone still holds it open.
bool read_some(int fd, std::string& message) {
  char buffer[4096];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  if (n > 0) {
    message.append(buffer, static_cast<size_t>(n));
    return true;
  }
  return n < 0 && errno == EINTR;
}

std::string describe_end(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = ::strsignal(signal);
    return "the process running the clause was killed by signal " + std::to_string(signal) + " (" +
           (name != nullptr ? name : "unknown") + ") before the clause returned";
  }
  if (WIFEXITED(status)) {
    return "the process running the clause exited with status " +
           std::to_string(WEXITSTATUS(status)) +
           " before the clause returned (the runtime ended the process)";
  }
  return "the process running the clause ended before the clause returned";
}

}  // namespace

ChildVerdict run_in_child(const std::function<ChildVerdict()>& body,
                          std::chrono::milliseconds bound) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return failed(errno_text("could not create the clause's pipe"));
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const ChildVerdict verdict = failed(errno_text("could not fork the clause's process"));
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return verdict;
  }
  if (pid == 0) {
    ::close(pipe_fds[0]);
    report_and_exit(pipe_fds[1], body());
  }
  ::close(pipe_fds[1]);
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    const ChildVerdict verdict = failed(errno_text("could not watch the clause's process"));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ::close(pipe_fds[0]);
    return verdict;
  }

  // Wait for the child to end, reading its report as it arrives. The pipe's EOF alone would
  // not do: a process the runtime started may hold the pipe's write end open.
  std::string message;
  bool pipe_open = true;
  bool ended = false;
  const auto deadline = ChildClock::now() + bound;
  while (!ended) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - ChildClock::now()).count();
    if (left <= 0) {
      break;
    }
    pollfd fds[2] = {{pidfd, POLLIN, 0}, {pipe_open ? pipe_fds[0] : -1, POLLIN, 0}};
    const int ready = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (ready < 0 && errno != EINTR) {
      break;
    }
    if (pipe_open && (fds[1].revents & (POLLIN | POLLHUP)) != 0) {
      pipe_open = read_some(pipe_fds[0], message);
    }
    ended = (fds[0].revents & POLLIN) != 0;
  }
  if (!ended) {
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // Whatever the child wrote before it ended and has not been read yet.
  ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  while (pipe_open) {
    pipe_open = read_some(pipe_fds[0], message);
  }
  ::close(pipe_fds[0]);
  ::close(pidfd);

  if (!ended) {
    return failed(fmt::format("did not return within {:g} s of wall time; its process was killed",
                              static_cast<double>(bound.count()) / 1000.0));
  }
  if (!message.empty() && message[0] >= '0' && message[0] <= '2' && WIFEXITED(status) &&
      WEXITSTATUS(status) == 0) {
    return ChildVerdict{static_cast<ChildVerdict::Kind>(message[0] - '0'), message.substr(1)};
  }
  return failed(describe_end(status));
}

}  // namespace runner
