// The client refuses to talk to a listener of another user: in a directory others can write,
// another uid may have bound the socket path first, and the client's hello (its name and
// device config) would go to it. Needs root, to play the other user.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "client_session.hpp"

namespace calrt_test {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kOtherUid = 65534;

// A listener at `path` run by kOtherUid in a child process. Its exit status says what it
// received from the one connection it accepts: 0 nothing (EOF), 1 bytes, 2 it could not set
// up, 3 nobody connected within 10 s. Syscalls only in the child: the test has threads.
// The constructor returns once the child listens (a byte on a pipe), not when the path
// exists: a client connecting between bind() and listen() would be refused by the kernel
// and never reach the check under test.
class ForeignListener {
 public:
  explicit ForeignListener(const fs::path& path) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    int ready[2] = {-1, -1};
    if (::pipe2(ready, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe2: " << std::strerror(errno);
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      if (::setresgid(kOtherUid, kOtherUid, kOtherUid) != 0 ||
          ::setresuid(kOtherUid, kOtherUid, kOtherUid) != 0) {
        ::_exit(2);
      }
      const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
          ::listen(listener, 4) != 0) {
        ::_exit(2);
      }
      const char listening = 'L';
      if (::write(ready[1], &listening, 1) != 1) ::_exit(2);
      ::close(ready[1]);
      pollfd pfd{listener, POLLIN, 0};
      if (::poll(&pfd, 1, 10000) <= 0) ::_exit(3);
      const int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) ::_exit(2);
      pollfd data{fd, POLLIN, 0};
      if (::poll(&data, 1, 10000) <= 0) ::_exit(3);
      char byte = 0;
      ::_exit(::recv(fd, &byte, 1, 0) > 0 ? 1 : 0);
    }
    ::close(ready[1]);
    // Bounded: a child that fails its setup exits, and its end of the pipe closes with it.
    pollfd pfd{ready[0], POLLIN, 0};
    char byte = 0;
    if (::poll(&pfd, 1, 10000) <= 0 || ::read(ready[0], &byte, 1) != 1) {
      ADD_FAILURE() << "the foreign listener did not start listening";
    }
    ::close(ready[0]);
  }
  ~ForeignListener() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // The child's exit status, or -1 when it had to be killed (bounded: 15 s).
  int result() {
    if (pid_ <= 0) return -1;  // never started: waitpid(-1) would reap any child instead
    int status = 0;
    for (int i = 0; i < 300; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

fs::path shared_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("calrt-foreign-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::all);  // world-writable, like a careless /tmp setup
  return dir;
}

TEST(ForeignListener, TheClientRefusesAnotherUsersSocketBeforeSayingHello) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to play another user";
  ::unsetenv("CALRT_DAEMON_UID");
  const fs::path dir = shared_dir("refuse");
  ForeignListener listener(dir / "calrt.sock");
  const calrt::Api api = client_api("unix:" + (dir / "calrt.sock").string());
  try {
    calrt::Device::create(api, calrt::DeviceKind::sim, 0, "");
    ADD_FAILURE() << "Device_Create through another user's socket succeeded";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_INVALID_ARGUMENT) << error.what();
    EXPECT_NE(std::string(error.what()).find("is served by uid 65534"), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("CALRT_DAEMON_UID"), std::string::npos);
  }
  EXPECT_EQ(listener.result(), 0) << "the listener received bytes: the hello left the client";
  fs::remove_all(dir);
}

// The negative control: trusting that uid, the same client does send its hello, so the
// refusal above is the check's doing and the listener really could have read it.
TEST(ForeignListener, TrustingTheUidSendsTheHello) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to play another user";
  const fs::path dir = shared_dir("trust");
  ForeignListener listener(dir / "calrt.sock");
  ::setenv("CALRT_DAEMON_UID", std::to_string(kOtherUid).c_str(), 1);
  const calrt::Api api = client_api("unix:" + (dir / "calrt.sock").string());
  try {
    calrt::Device::create(api, calrt::DeviceKind::sim, 0, "service.connect_timeout_ms=2000");
  } catch (const calrt::Error&) {
    // The fake listener never answers the hello: the create fails, after sending it.
  }
  ::unsetenv("CALRT_DAEMON_UID");
  EXPECT_EQ(listener.result(), 1) << "the trusted listener should have received the hello";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace calrt_test
