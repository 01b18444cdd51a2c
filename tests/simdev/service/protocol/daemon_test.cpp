// A real `simdev serve` over raw sockets: the handshake and its refusals, the client limit,
// out-of-order and malformed messages (goodbye and close, while a well-behaved session keeps
// working), handle isolation between sessions, the shared device's config, the socket's
// mode and the shutdown. Every read is bounded by a receive timeout.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include "tests/sanitized.hpp"

#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "daemon_process.hpp"
#include "simdev/service/protocol.hpp"

namespace svc = simdev::service;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

using calrt_test::kSanitized;

namespace {

struct RawFrame {
  svc::FrameHeader header;
  std::vector<uint8_t> payload;
};

class RawClient {
 public:
  static RawClient unix_socket(const fs::path& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      throw std::runtime_error("connect " + path.string() + ": " + std::strerror(errno));
    }
    return RawClient(fd);
  }
  // A connection made by a child process running as uid:gid and handed to this process
  // (SCM_RIGHTS): the kernel keeps the connecting process's credentials on the socket, so the
  // daemon sees that uid while the test drives the connection with every helper here. The
  // child makes syscalls only (this process has threads). Throws when it could not.
  static RawClient unix_as(const fs::path& path, uid_t uid, gid_t gid) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      throw std::runtime_error("socketpair failed");
    }
    const pid_t child = ::fork();
    if (child == 0) {
      int fd = -1;
      if (::setgroups(0, nullptr) == 0 && ::setresgid(gid, gid, gid) == 0 &&
          ::setresuid(uid, uid, uid) == 0) {
        fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
          fd = -1;
        }
      }
      char byte = fd >= 0 ? 1 : 0;
      iovec iov{&byte, 1};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      if (fd >= 0) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(cmsg), &fd, sizeof fd);
      }
      ::_exit(::sendmsg(pair[1], &msg, 0) == 1 ? 0 : 1);
    }
    ::close(pair[1]);
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    pollfd pfd{pair[0], POLLIN, 0};
    const bool got = ::poll(&pfd, 1, 10000) == 1 && ::recvmsg(pair[0], &msg, 0) == 1 && byte == 1;
    ::close(pair[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    const cmsghdr* cmsg = got ? CMSG_FIRSTHDR(&msg) : nullptr;
    if (cmsg == nullptr || cmsg->cmsg_type != SCM_RIGHTS) {
      throw std::runtime_error("no connection as uid " + std::to_string(uid));
    }
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(cmsg), sizeof fd);
    return RawClient(fd);
  }
  static RawClient tcp(const std::string& endpoint) {  // tcp:127.0.0.1:PORT
    const auto port = static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      throw std::runtime_error("connect " + endpoint + ": " + std::strerror(errno));
    }
    return RawClient(fd);
  }
  RawClient(RawClient&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }

  void send_bytes(const std::vector<uint8_t>& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("send failed");
      sent += static_cast<size_t>(n);
    }
  }
  void send_frame(svc::MessageType type, uint32_t id, const std::vector<uint8_t>& payload) {
    send_bytes(svc::encode_frame(type, id, payload));
  }
  template <class C>
  void send_request(uint32_t id, const typename C::In& in) {
    send_frame(svc::MessageType::request, id, svc::encode_request_payload<C>(in));
  }
  void half_close() { ::shutdown(fd_, SHUT_WR); }

  // The next frame other than a keepalive; nullopt at end of stream.
  std::optional<RawFrame> read_frame() {
    while (true) {
      std::vector<uint8_t> header(svc::kHeaderBytes);
      if (!read_exact(header)) return std::nullopt;
      auto decoded = svc::decode_header(header);
      if (!decoded) throw std::runtime_error("daemon sent a bad header: " + decoded.error());
      RawFrame frame{*decoded, std::vector<uint8_t>(decoded->payload_bytes())};
      if (!read_exact(frame.payload)) throw std::runtime_error("daemon frame truncated");
      if (frame.header.type == svc::MessageType::keepalive) {
        ++keepalives_;
        continue;
      }
      return frame;
    }
  }
  // Reads until the daemon closes; fails the test on a frame other than keepalive.
  bool closed_by_daemon() {
    try {
      return !read_frame().has_value();
    } catch (const std::exception&) {
      return true;  // ECONNRESET counts as closed
    }
  }
  size_t keepalives() const { return keepalives_; }

  svc::Welcome handshake(const std::string& name = "protocol-test", const std::string& token = "") {
    svc::Hello hello;
    hello.client_name = name;
    hello.token = token;
    hello.client_pid = static_cast<uint32_t>(::getpid());
    send_frame(svc::MessageType::hello, 0, svc::encode_payload(hello));
    auto frame = read_frame();
    if (!frame) throw std::runtime_error("no answer to hello");
    if (frame->header.type != svc::MessageType::welcome) {
      auto notice = svc::decode_payload<svc::Notice>(frame->payload, "refused");
      throw std::runtime_error("hello not welcomed: " + (notice ? notice->message : ""));
    }
    auto welcome = svc::decode_payload<svc::Welcome>(frame->payload, "welcome");
    if (!welcome) throw std::runtime_error(welcome.error());
    return *welcome;
  }

  template <class C>
  svc::Response<C> call(const typename C::In& in) {
    const uint32_t id = next_id_++;
    send_request<C>(id, in);
    auto frame = read_frame();
    if (!frame) throw std::runtime_error("connection closed awaiting a response");
    if (frame->header.type != svc::MessageType::response || frame->header.request_id != id) {
      throw std::runtime_error("unexpected frame type " +
                               std::to_string(static_cast<int>(frame->header.type)));
    }
    auto response = svc::decode_response_payload<C>(frame->payload);
    if (!response) throw std::runtime_error(response.error());
    return *response;
  }

  uint64_t attach(const std::optional<std::string>& config = std::nullopt) {
    svc::DeviceCreate::In in;
    in.kind = CALRT_DEVICE_SIM;
    in.config = config;
    auto r = call<svc::DeviceCreate>(in);
    if (r.code != CALRT_OK) throw std::runtime_error("Device_Create: " + r.message);
    return r.out.device.id;
  }

 private:
  explicit RawClient(int fd) : fd_(fd) {
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  bool read_exact(std::vector<uint8_t>& out) {
    size_t got = 0;
    while (got < out.size()) {
      const ssize_t n = ::recv(fd_, out.data() + got, out.size() - got, 0);
      if (n == 0) return false;
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) throw std::runtime_error("read timed out");
        throw std::runtime_error(std::string("recv: ") + std::strerror(errno));
      }
      got += static_cast<size_t>(n);
    }
    return true;
  }

  int fd_ = -1;
  uint32_t next_id_ = 1;
  size_t keepalives_ = 0;
};

svc::Notice expect_notice(RawClient& client, svc::MessageType type) {
  auto frame = client.read_frame();
  if (!frame) throw std::runtime_error("closed without a notice");
  EXPECT_EQ(frame->header.type, type);
  auto notice = svc::decode_payload<svc::Notice>(frame->payload, "notice");
  if (!notice) throw std::runtime_error(notice.error());
  return *notice;
}

fs::path scratch(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::temp_directory_path() /
                       ("svc-proto-" + std::to_string(::getpid()) + "-" + info->name() + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

class DaemonTest : public ::testing::Test {
 protected:
  void start(std::vector<std::string> args = {}) {
    dir_ = scratch("");
    daemon_ = std::make_unique<calrt_test::DaemonProcess>(
        dir_, calrt_test::DaemonOptions{std::move(args)});
  }
  void TearDown() override {
    daemon_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  RawClient connect() { return RawClient::unix_socket(daemon_->socket()); }
  // The daemon still serves a fresh client end to end.
  void expect_alive() {
    RawClient fresh = connect();
    fresh.handshake("fresh");
    const uint64_t device = fresh.attach();
    svc::DeviceStatus::In in;
    in.device.id = device;
    auto status = fresh.call<svc::DeviceStatus>(in);
    EXPECT_EQ(status.code, 0u) << status.message;
    svc::DeviceDestroy::In destroy;
    destroy.device.id = device;
    EXPECT_EQ(fresh.call<svc::DeviceDestroy>(destroy).code, 0u);
  }

  fs::path dir_;
  std::unique_ptr<calrt_test::DaemonProcess> daemon_;
};

}  // namespace

TEST_F(DaemonTest, HandshakeAttachStatusDetach) {
  start({"--keepalive-ms", "50"});
  RawClient client = connect();
  const svc::Welcome welcome = client.handshake();
  EXPECT_EQ(welcome.protocol_major, svc::kProtocolMajor);
  EXPECT_EQ(welcome.abi_major, static_cast<uint32_t>(CALRT_ABI_MAJOR));
  EXPECT_NE(welcome.session_id, 0u);
  EXPECT_EQ(welcome.keepalive_ms, 50u);
  EXPECT_EQ(welcome.max_clients, 16u);
  const uint64_t device = client.attach();
  EXPECT_NE(device, 0u);
  std::this_thread::sleep_for(200ms);
  svc::DeviceStatus::In in;
  in.device.id = device;
  auto status = client.call<svc::DeviceStatus>(in);
  ASSERT_EQ(status.code, 0u) << status.message;
  EXPECT_EQ(status.out.state, static_cast<uint32_t>(CALRT_DEVICE_OPEN));
  EXPECT_EQ(status.out.abi_major, static_cast<uint32_t>(CALRT_ABI_MAJOR));
  EXPECT_GE(client.keepalives(), 1u);
  svc::DiagStateHash::In hash;
  hash.device.id = device;
  EXPECT_EQ(client.call<svc::DiagStateHash>(hash).code, 0u);
  svc::DeviceDestroy::In destroy;
  destroy.device.id = device;
  EXPECT_EQ(client.call<svc::DeviceDestroy>(destroy).code, 0u);
}

// The daemon's minor page faults so far (/proc/PID/stat field 10): memory it touched.
uint64_t minor_faults(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  for (int i = 3; i <= 10; ++i) fields >> field;
  return std::stoull(field);
}

// A tenant's Diag_Report with a capacity of 2^64-1 costs the daemon what the report needs,
// not the 64 MiB it asked for: zeroing that much per call (16,384 pages) let a stream of such
// calls stall every other tenant. The figure: the daemon's page faults over 16 calls, against
// the 262,144 a zero-filled buffer would take (and 178 ms a call).
TEST_F(DaemonTest, AHugeDiagCapacityCostsOnlyTheReport) {
  if (kSanitized) GTEST_SKIP() << "the sanitizers' allocator touches shadow memory per allocation";
  start();
  RawClient client = connect();
  client.handshake();
  const uint64_t device = client.attach();
  svc::DiagReport::In in;
  in.device.id = device;
  in.capacity = 4096;
  const auto small = client.call<svc::DiagReport>(in);
  ASSERT_EQ(small.code, 0u) << small.message;
  ASSERT_GT(small.out.size, 0u);
  const uint64_t before = minor_faults(daemon_->pid());
  in.capacity = ~uint64_t{0};
  for (int i = 0; i < 16; ++i) {
    const auto huge = client.call<svc::DiagReport>(in);
    ASSERT_EQ(huge.code, 0u) << huge.message;
    EXPECT_EQ(huge.out.size, huge.out.report.size());  // the whole report came back
  }
  const uint64_t faults = minor_faults(daemon_->pid()) - before;
  EXPECT_LT(faults, 4096u) << faults << " page faults for 16 reports of " << small.out.size
                           << " bytes";
}

TEST_F(DaemonTest, RefusesWrongMagicProtocolAndAbi) {
  start();
  struct Case {
    const char* what;
    svc::Hello hello;
    uint32_t code;
    const char* field;
  };
  std::vector<Case> cases(3);
  cases[0] = {"magic", {}, CALRT_INVALID_ARGUMENT, "'magic'"};
  cases[0].hello.magic = 0x12345678;
  cases[1] = {"protocol", {}, svc::kAbiMismatchCode, "'protocol_major'"};
  cases[1].hello.protocol_major = svc::kProtocolMajor + 1;
  cases[2] = {"abi", {}, svc::kAbiMismatchCode, "'abi_major'"};
  cases[2].hello.abi_major = CALRT_ABI_MAJOR + 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    RawClient client = connect();
    client.send_frame(svc::MessageType::hello, 0, svc::encode_payload(c.hello));
    const svc::Notice notice = expect_notice(client, svc::MessageType::refused);
    EXPECT_EQ(notice.code, c.code);
    EXPECT_NE(notice.message.find(c.field), std::string::npos) << notice.message;
    EXPECT_TRUE(client.closed_by_daemon());
  }
  // A client of protocol 1, whose hello has no token: told which protocol the daemon speaks,
  // not cut off for a short frame. Its layout, field by field (PROTOCOL.md, "Connection").
  RawClient old = connect();
  std::vector<uint8_t> hello;
  svc::Writer w(hello);
  w.u32(svc::kHelloMagic);
  w.u16(1);
  w.u16(0);
  w.u32(CALRT_ABI_MAJOR);
  w.u32(CALRT_ABI_MINOR);
  w.u32(3);
  for (const char c : std::string("old")) w.u8(static_cast<uint8_t>(c));
  w.u32(42);
  ASSERT_FALSE(svc::decode_payload<svc::Hello>(hello, "hello")) << "protocol 1's layout";
  old.send_frame(svc::MessageType::hello, 0, hello);
  const svc::Notice notice = expect_notice(old, svc::MessageType::refused);
  EXPECT_EQ(notice.code, svc::kAbiMismatchCode);
  EXPECT_NE(notice.message.find("'protocol_major': 1, the daemon speaks protocol " +
                                std::to_string(svc::kProtocolMajor)),
            std::string::npos)
      << notice.message;
  expect_alive();
}

TEST_F(DaemonTest, ClientLimitRefusesWithBusy) {
  start({"--max-clients", "2"});
  RawClient a = connect();
  a.handshake();
  {
    RawClient b = connect();
    b.handshake();
    RawClient c = connect();
    c.send_frame(svc::MessageType::hello, 0, svc::encode_payload(svc::Hello{}));
    const svc::Notice notice = expect_notice(c, svc::MessageType::refused);
    EXPECT_EQ(notice.code, static_cast<uint32_t>(CALRT_BUSY));
    EXPECT_NE(notice.message.find("limit of 2"), std::string::npos) << notice.message;
    EXPECT_TRUE(c.closed_by_daemon());
  }
  // b is gone: its place frees once the daemon saw the close.
  bool welcomed = false;
  for (int attempt = 0; attempt < 100 && !welcomed; ++attempt) {
    RawClient d = connect();
    d.send_frame(svc::MessageType::hello, 0, svc::encode_payload(svc::Hello{}));
    auto frame = d.read_frame();
    welcomed = frame && frame->header.type == svc::MessageType::welcome;
    if (!welcomed) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(welcomed);
}

TEST_F(DaemonTest, OutOfOrderMessagesCloseOnlyThatConnection) {
  start();
  RawClient good = connect();
  good.handshake("good");
  const uint64_t device = good.attach();

  struct Case {
    const char* what;
    std::function<void(RawClient&)> act;
    const char* expect;
  };
  const auto hello = svc::encode_payload(svc::Hello{});
  svc::DeviceCreate::In create;
  create.kind = CALRT_DEVICE_SIM;
  svc::DeviceStatus::In status;
  status.device.id = 1;
  const std::vector<Case> cases = {
      {"request before hello", [&](RawClient& c) { c.send_request<svc::DeviceStatus>(1, status); },
       "request before hello"},
      {"second hello",
       [&](RawClient& c) {
         c.handshake();
         c.send_frame(svc::MessageType::hello, 0, hello);
       },
       "second hello"},
      {"first request not Device_Create",
       [&](RawClient& c) {
         c.handshake();
         c.send_request<svc::DeviceStatus>(1, status);
       },
       "not Device_Create"},
      {"second Device_Create",
       [&](RawClient& c) {
         c.handshake();
         c.attach();
         c.send_request<svc::DeviceCreate>(9, create);
       },
       "second Device_Create"},
      {"welcome from the client",
       [&](RawClient& c) {
         c.handshake();
         c.send_frame(svc::MessageType::welcome, 0, svc::encode_payload(svc::Welcome{}));
       },
       "only the daemon sends"},
      {"response from the client",
       [&](RawClient& c) { c.send_frame(svc::MessageType::response, 3, {}); },
       "only the daemon sends"},
      {"reused request id",
       [&](RawClient& c) {
         c.handshake();
         // Both in one write: the first is still outstanding when the second arrives.
         auto bytes = svc::encode_frame(svc::MessageType::request, 7,
                                        svc::encode_request_payload<svc::DeviceCreate>(create));
         auto second = svc::encode_frame(svc::MessageType::request, 7,
                                         svc::encode_request_payload<svc::DeviceStatus>(status));
         bytes.insert(bytes.end(), second.begin(), second.end());
         c.send_bytes(bytes);
       },
       "request id 7 is still outstanding"},
      {"bad header length",
       [&](RawClient& c) {
         auto frame = svc::encode_frame(svc::MessageType::hello, 0, {});
         frame[0] = 3;
         c.send_bytes(frame);
       },
       "length 3"},
      {"non-zero flags",
       [&](RawClient& c) {
         auto frame = svc::encode_frame(svc::MessageType::hello, 0, hello);
         frame[6] = 1;
         c.send_bytes(frame);
       },
       "flags 1"},
      {"unknown call",
       [&](RawClient& c) {
         c.handshake();
         c.send_frame(svc::MessageType::request, 1, {0x39, 0x05});
       },
       "unknown call 1337"},
      {"trailing bytes",
       [&](RawClient& c) {
         c.handshake();
         auto payload = svc::encode_request_payload<svc::DeviceCreate>(create);
         payload.push_back(1);
         c.send_frame(svc::MessageType::request, 1, payload);
       },
       "trailing bytes"},
      {"bad presence flag",
       [&](RawClient& c) {
         c.handshake();
         auto payload = svc::encode_request_payload<svc::DeviceCreate>(create);
         payload[2 + 8] = 7;  // config's presence flag, after call, kind and index
         c.send_frame(svc::MessageType::request, 1, payload);
       },
       "presence flag 7"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    RawClient bad = connect();
    c.act(bad);
    svc::Notice notice;
    while (true) {
      auto frame = bad.read_frame();
      ASSERT_TRUE(frame) << "closed without goodbye";
      if (frame->header.type == svc::MessageType::response) continue;
      ASSERT_EQ(frame->header.type, svc::MessageType::goodbye);
      notice = *svc::decode_payload<svc::Notice>(frame->payload, "goodbye");
      break;
    }
    EXPECT_EQ(notice.code, static_cast<uint32_t>(CALRT_INVALID_ARGUMENT));
    EXPECT_NE(notice.message.find(c.expect), std::string::npos) << notice.message;
    EXPECT_TRUE(bad.closed_by_daemon());
    svc::DeviceStatus::In in;
    in.device.id = device;
    auto answer = good.call<svc::DeviceStatus>(in);
    EXPECT_EQ(answer.code, 0u) << answer.message;
  }
  expect_alive();
}

TEST_F(DaemonTest, TruncatedFrameThenClose) {
  start();
  RawClient good = connect();
  good.handshake();
  const uint64_t device = good.attach();
  {
    RawClient bad = connect();
    bad.handshake();
    bad.attach();
    auto frame = svc::encode_frame(svc::MessageType::request, 2, std::vector<uint8_t>(100, 0));
    frame.resize(40);
    bad.send_bytes(frame);
  }
  {
    RawClient half = connect();
    half.send_bytes({0x10, 0x00, 0x00});
  }
  svc::DeviceStatus::In in;
  in.device.id = device;
  EXPECT_EQ(good.call<svc::DeviceStatus>(in).code, 0u);
  expect_alive();
}

TEST_F(DaemonTest, HandlesAreIsolatedBetweenSessions) {
  start();
  RawClient a = connect();
  a.handshake();
  const uint64_t device_a = a.attach();
  RawClient b = connect();
  b.handshake();
  const uint64_t device_b = b.attach();
  EXPECT_NE(device_a, device_b);
  svc::DeviceStatus::In in;
  in.device.id = device_a;
  auto foreign = b.call<svc::DeviceStatus>(in);
  EXPECT_EQ(foreign.code, static_cast<uint32_t>(CALRT_INVALID_HANDLE));
  EXPECT_NE(foreign.message.find(std::to_string(device_a)), std::string::npos) << foreign.message;
  // A device id used as a calbin: the kind is checked too.
  svc::CalbinGetInfo::In info;
  info.calbin.id = device_b;
  auto wrong_kind = b.call<svc::CalbinGetInfo>(info);
  EXPECT_EQ(wrong_kind.code, static_cast<uint32_t>(CALRT_INVALID_HANDLE));
  EXPECT_NE(wrong_kind.message.find("not a calbin"), std::string::npos) << wrong_kind.message;
  // A bad enum reaches the runtime by value and is refused there.
  svc::DeviceReset::In reset;
  reset.device.id = device_b;
  reset.level = 99;
  auto bad_level = b.call<svc::DeviceReset>(reset);
  EXPECT_EQ(bad_level.code, static_cast<uint32_t>(CALRT_INVALID_ARGUMENT)) << bad_level.message;
  // A calbin that does not exist is the runtime's answer, carried back.
  svc::CalbinCreate::In calbin;
  calbin.device.id = device_b;
  calbin.path = (dir_ / "no-such-calbin").string();
  auto missing = b.call<svc::CalbinCreate>(calbin);
  EXPECT_EQ(missing.code, static_cast<uint32_t>(CALRT_CALBIN_INVALID)) << missing.message;
}

// Batch (PROTOCOL.md, "Held buffer calls") runs held buffer calls only, in order, and stops
// at the first that fails; anything else in it is refused whole, and the connection stays.
TEST_F(DaemonTest, ABatchRunsOnlyHeldCallsAndStopsAtTheFirstFailure) {
  start();
  RawClient client = connect();
  client.handshake();
  const uint64_t device = client.attach();
  auto batch_of = [](std::vector<std::vector<uint8_t>> requests) {
    svc::Batch::In in;
    for (auto& r : requests) in.calls.push_back(svc::HeldCall{std::move(r)});
    return in;
  };
  svc::DeviceStatus::In status;
  status.device.id = device;
  svc::BufferSetCsr::In set_csr;
  set_csr.buffer.id = 777;  // no such buffer
  svc::JobDestroy::In destroy;
  destroy.job.id = 778;
  svc::JobSubmit::In submit;
  submit.calbin.id = 779;
  submit.model_name = "decode";

  auto refused = [&](svc::Batch::In in, const char* says) {
    auto answer = client.call<svc::Batch>(in);
    EXPECT_EQ(answer.code, static_cast<uint32_t>(CALRT_INVALID_ARGUMENT)) << answer.message;
    EXPECT_NE(answer.message.find(says), std::string::npos) << answer.message;
    EXPECT_EQ(answer.out.ran, 0u);
  };
  refused(batch_of({svc::encode_request_payload<svc::DeviceStatus>(status)}), "cannot be batched");
  refused(batch_of({svc::encode_request_payload<svc::Batch>(batch_of({}))}), "cannot be batched");
  refused(batch_of({svc::encode_request_payload<svc::JobSubmit>(submit),
                    svc::encode_request_payload<svc::BufferSetCsr>(set_csr)}),
          "then Job_Submit");
  // A wait rides only behind the batch's submit, and names that submit's job as job 0.
  svc::JobWait::In wait;
  refused(batch_of({svc::encode_request_payload<svc::BufferSetCsr>(set_csr),
                    svc::encode_request_payload<svc::JobWait>(wait)}),
          "calls[1]: Job_Wait cannot be batched");
  wait.job.id = 5;
  refused(batch_of({svc::encode_request_payload<svc::JobSubmit>(submit),
                    svc::encode_request_payload<svc::JobWait>(wait)}),
          "calls[0]: Job_Submit cannot be batched");
  refused(batch_of({svc::encode_request_payload<svc::BufferSetCsr>(set_csr), {0xff, 0xff}}),
          "calls[1]: request: unknown call");
  refused(batch_of(std::vector<std::vector<uint8_t>>(
              svc::kMaxBatchCalls + 1, svc::encode_request_payload<svc::BufferSetCsr>(set_csr))),
          "at most 4096");

  // Held calls run until the first failure; the answer is that call's own response.
  auto stopped =
      client.call<svc::Batch>(batch_of({svc::encode_request_payload<svc::JobDestroy>(destroy),
                                        svc::encode_request_payload<svc::BufferSetCsr>(set_csr)}));
  ASSERT_EQ(stopped.code, 0u) << stopped.message;
  EXPECT_EQ(stopped.out.ran, 1u);
  auto first = svc::decode_response_payload<svc::JobDestroy>(stopped.out.response);
  ASSERT_TRUE(first) << first.error();
  EXPECT_EQ(first->code, static_cast<uint32_t>(CALRT_INVALID_HANDLE)) << first->message;
  EXPECT_NE(first->message.find("778"), std::string::npos) << first->message;

  // A submit that fails stops the batch before its wait: the answer is the batch's, its
  // response the submit's refusal. No job was made: job 0 then names nothing.
  wait.job.id = 0;
  auto unsent =
      client.call<svc::Batch>(batch_of({svc::encode_request_payload<svc::JobSubmit>(submit),
                                        svc::encode_request_payload<svc::JobWait>(wait)}));
  ASSERT_EQ(unsent.code, 0u) << unsent.message;
  EXPECT_EQ(unsent.out.ran, 1u);
  auto refused_submit = svc::decode_response_payload<svc::JobSubmit>(unsent.out.response);
  ASSERT_TRUE(refused_submit) << refused_submit.error();
  EXPECT_EQ(refused_submit->code, static_cast<uint32_t>(CALRT_INVALID_HANDLE))
      << refused_submit->message;
  auto no_job = client.call<svc::JobCancel>(svc::JobCancel::In{});
  EXPECT_EQ(no_job.code, static_cast<uint32_t>(CALRT_INVALID_HANDLE)) << no_job.message;
  expect_alive();
}

// On a paced clock a trailing wait would hold the device lane, shared by every session,
// while the job runs: such a batch is refused whole, its held calls unrun.
TEST_F(DaemonTest, ABatchEndingInAWaitNeedsAVirtualClock) {
  start({"--device-config", "clock=paced"});
  RawClient client = connect();
  client.handshake();
  client.attach();
  svc::JobDestroy::In destroy;
  destroy.job.id = 778;  // no such job: its refusal would show had the batch run
  svc::JobSubmit::In submit;
  submit.calbin.id = 779;
  svc::Batch::In batch;
  batch.calls = {svc::HeldCall{svc::encode_request_payload<svc::JobDestroy>(destroy)},
                 svc::HeldCall{svc::encode_request_payload<svc::JobSubmit>(submit)},
                 svc::HeldCall{svc::encode_request_payload<svc::JobWait>(svc::JobWait::In{})}};
  auto answer = client.call<svc::Batch>(batch);
  EXPECT_EQ(answer.code, static_cast<uint32_t>(CALRT_INVALID_ARGUMENT)) << answer.message;
  EXPECT_NE(answer.message.find("needs a device on a virtual clock"), std::string::npos)
      << answer.message;
  EXPECT_EQ(answer.out.ran, 0u);
  expect_alive();
}

TEST_F(DaemonTest, SharedDeviceRefusesAnotherConfig) {
  start({"--device-config", "dram_mib=2048"});
  RawClient a = connect();
  a.handshake();
  a.attach(std::string("seed=1"));
  RawClient b = connect();
  b.handshake();
  svc::DeviceCreate::In in;
  in.kind = CALRT_DEVICE_SIM;
  in.config = "seed=2";
  auto busy = b.call<svc::DeviceCreate>(in);
  EXPECT_EQ(busy.code, static_cast<uint32_t>(CALRT_BUSY));
  // Its own config is echoed; the other session's is not (it may hold that session's paths).
  EXPECT_EQ(busy.message.find("seed=1"), std::string::npos) << busy.message;
  EXPECT_NE(busy.message.find("seed=2"), std::string::npos) << busy.message;
  // The same config joins the shared device.
  in.config = "seed=1";
  EXPECT_EQ(b.call<svc::DeviceCreate>(in).code, 0u);
}

// A client's config file would be read with the daemon's rights and its contents echoed in
// the error: any local user could read what the daemon can.
TEST_F(DaemonTest, AClientConfigFileIsRefusedUnread) {
  start();
  const fs::path secret = dir_ / "secret.yaml";
  std::ofstream(secret) << "the-secret-line\n";
  fs::permissions(secret, fs::perms::owner_read);
  RawClient client = connect();
  client.handshake();
  svc::DeviceCreate::In in;
  in.kind = CALRT_DEVICE_SIM;
  in.config = "config=" + secret.string();
  auto refused = client.call<svc::DeviceCreate>(in);
  EXPECT_EQ(refused.code, static_cast<uint32_t>(CALRT_INVALID_ARGUMENT));
  EXPECT_EQ(refused.message.find("the-secret-line"), std::string::npos) << refused.message;
  EXPECT_NE(refused.message.find("--device-config"), std::string::npos) << refused.message;
  expect_alive();
}

// Before hello a peer may not make the daemon buffer a large frame: a header announcing
// 1 MiB is refused and the connection closed at once, without waiting for the bytes.
TEST_F(DaemonTest, LargeFramesBeforeHelloAreRefused) {
  start();
  RawClient peer = connect();
  auto header = svc::encode_frame(svc::MessageType::hello, 0, std::vector<uint8_t>(1 << 20, 0));
  header.resize(svc::kHeaderBytes);  // the payload never comes
  peer.send_bytes(header);
  const svc::Notice notice = expect_notice(peer, svc::MessageType::goodbye);
  EXPECT_NE(notice.message.find("exceeds the limit of 4096"), std::string::npos) << notice.message;
  EXPECT_TRUE(peer.closed_by_daemon());
  expect_alive();
}

// Out of file descriptors, accept() fails at once for as long as the cause lasts: the daemon
// must back off and say so instead of spinning its io thread.
TEST_F(DaemonTest, AcceptFailuresBackOffInsteadOfSpinning) {
  // A sanitizer's runtime needs file descriptors of its own (UBSan's dynamic type checks,
  // the symbolizer) and reports false errors in a process that has none left: this test runs
  // in the normal build only.
  if (kSanitized) GTEST_SKIP() << "the daemon runs out of file descriptors on purpose";
  start();
  const pid_t pid = daemon_->pid();
  rlimit before{};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, nullptr, &before), 0);
  const rlimit tight{daemon_->open_fds(), before.rlim_max};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &tight, nullptr), 0);
  std::vector<RawClient> waiting;
  for (int i = 0; i < 3; ++i) waiting.push_back(connect());  // queued, never accepted
  auto cpu_seconds = [pid] {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int k = 3; k <= 15 && fields >> field; ++k) {
      if (k == 14) utime = std::stoull(field);
      if (k == 15) stime = std::stoull(field);
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  };
  // A spinning accept loop burns the whole second; backing off costs next to nothing. The
  // bound leaves room for a loaded machine.
  const double cpu_before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double cpu_used = cpu_seconds() - cpu_before;
  EXPECT_LT(cpu_used, 0.5) << "the accept loop spins\n" << daemon_->output();
  bool logged = false;
  for (int i = 0; i < 50 && !logged; ++i) {
    logged = daemon_->output().find("accept failed") != std::string::npos;
    if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(logged) << daemon_->output();
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &before, nullptr), 0);
  waiting.clear();
  expect_alive();
}

TEST_F(DaemonTest, SocketIsOwnerOnlyAndTcpIsLoopback) {
  start({"--tcp", "0"});
  struct stat st {};
  ASSERT_EQ(::lstat(daemon_->socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(daemon_->tcp_endpoint().rfind("tcp:127.0.0.1:", 0), 0u) << daemon_->tcp_endpoint();
  RawClient client = RawClient::tcp(daemon_->tcp_endpoint());
  client.handshake("tcp", daemon_->token());
  EXPECT_NE(client.attach(), 0u);
}

TEST_F(DaemonTest, ShutdownSaysGoodbyeAndRemovesSocket) {
  start();
  RawClient client = connect();
  client.handshake();
  client.attach();
  RawClient idle = connect();
  const int status = daemon_->terminate(10000ms);
  const svc::Notice notice = expect_notice(client, svc::MessageType::goodbye);
  EXPECT_EQ(notice.code, static_cast<uint32_t>(CALRT_DEVICE_LOST));
  EXPECT_EQ(notice.message, "daemon shutting down");
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(daemon_->socket()));
  const std::string output = daemon_->output();
  EXPECT_NE(output.find("1 sessions served"), std::string::npos) << output;
}

// A connection that says nothing, or says hello and never asks for a device, is closed after
// the handshake timeout with a notice that says why; the slot it held serves a real client.
TEST_F(DaemonTest, SilentConnectionsAreClosedAfterTheHandshakeTimeout) {
  start({"--max-clients", "2", "--handshake-timeout-ms", "300"});
  RawClient silent = connect();
  RawClient greeted_a = connect();
  RawClient greeted_b = connect();
  greeted_a.handshake("idle-a");
  greeted_b.handshake("idle-b");
  // Both client slots are held: a third hello is refused while they last.
  {
    RawClient third = connect();
    EXPECT_THROW(third.handshake("third"), std::runtime_error);
  }
  const auto begin = std::chrono::steady_clock::now();
  const svc::Notice refused = expect_notice(silent, svc::MessageType::refused);
  EXPECT_NE(refused.message.find("no hello within 300 ms"), std::string::npos) << refused.message;
  EXPECT_TRUE(silent.closed_by_daemon());
  for (RawClient* idle : {&greeted_a, &greeted_b}) {
    const svc::Notice bye = expect_notice(*idle, svc::MessageType::goodbye);
    EXPECT_NE(bye.message.find("no Device_Create within 300 ms"), std::string::npos) << bye.message;
    EXPECT_TRUE(idle->closed_by_daemon());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
  expect_alive();
}

// An attached client is not subject to the handshake timeout, however long it stays idle.
TEST_F(DaemonTest, AnAttachedClientMayStayIdle) {
  start({"--handshake-timeout-ms", "100"});
  RawClient client = connect();
  client.handshake("patient");
  const uint64_t device = client.attach();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  svc::DeviceStatus::In in;
  in.device.id = device;
  EXPECT_EQ(client.call<svc::DeviceStatus>(in).code, 0u);
}

// With --idle-timeout-ms an attached session that sends nothing is told goodbye, and its
// client slot serves another; one that keeps calling, or waits for an answer, is not.
TEST_F(DaemonTest, IdleSessionsAreClosedAfterTheIdleTimeout) {
  start({"--max-clients", "2", "--idle-timeout-ms", "400"});
  RawClient idle = connect();
  idle.handshake("idle");
  idle.attach();
  RawClient busy = connect();
  busy.handshake("busy");
  svc::DeviceStatus::In in;
  in.device.id = busy.attach();
  // The busy client calls every 100 ms on a thread of its own, for three times the timeout,
  // while the idle one is watched for its goodbye.
  std::vector<uint32_t> codes;
  std::thread calls([&] {
    for (int i = 0; i < 12; ++i) {
      try {
        codes.push_back(busy.call<svc::DeviceStatus>(in).code);
      } catch (const std::exception&) {
        codes.push_back(UINT32_MAX);  // the daemon hung up on it
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const auto begin = std::chrono::steady_clock::now();
  const svc::Notice bye = expect_notice(idle, svc::MessageType::goodbye);
  EXPECT_EQ(bye.code, static_cast<uint32_t>(CALRT_WRONG_STATE));
  EXPECT_NE(bye.message.find("the daemon's --idle-timeout-ms is 400"), std::string::npos)
      << bye.message;
  EXPECT_TRUE(idle.closed_by_daemon());
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(5));
  calls.join();
  EXPECT_EQ(codes, std::vector<uint32_t>(12, 0u)) << "the busy client was cut or refused";
  RawClient next = connect();
  next.handshake("next");
  EXPECT_NE(next.attach(), 0u) << "the idle session's slot is free again";
}

// Connections beyond --max-connections are closed before anything of them is read, hello or
// not; they count whether or not they have said hello.
TEST_F(DaemonTest, ConnectionsBeyondTheLimitAreClosedAtOnce) {
  start({"--max-clients", "2", "--max-connections", "3", "--handshake-timeout-ms", "60000"});
  std::vector<RawClient> silent;
  for (int i = 0; i < 3; ++i) silent.push_back(connect());
  RawClient extra = connect();  // the kernel accepts; the daemon closes it
  EXPECT_TRUE(extra.closed_by_daemon());
  silent.pop_back();  // one slot frees when the daemon sees the close
  bool served = false;
  for (int attempt = 0; attempt < 50 && !served; ++attempt) {
    try {
      RawClient next = connect();
      next.handshake("after");
      served = next.attach() != 0;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_TRUE(served);
}

// `count` requests of call C with ids from `first`, as one buffer sent in one write.
template <class C>
std::vector<uint8_t> request_burst(uint32_t first, uint32_t count, const typename C::In& in) {
  std::vector<uint8_t> burst;
  for (uint32_t id = first; id < first + count; ++id) {
    const auto frame =
        svc::encode_frame(svc::MessageType::request, id, svc::encode_request_payload<C>(in));
    burst.insert(burst.end(), frame.begin(), frame.end());
  }
  return burst;
}

// A session that pipelines requests without reading its answers may queue 64 for the device;
// the rest are answered BUSY at once, each answered, none dropped, the session kept.
TEST_F(DaemonTest, QueuedRequestsPerSessionAreBounded) {
  start();
  RawClient flood = connect();
  flood.handshake("flood");
  const uint64_t device = flood.attach();
  svc::DeviceStatus::In in;
  in.device.id = device;
  constexpr uint32_t kSent = 2000;  // one burst, read by the daemon in one or two reads
  flood.send_bytes(request_burst<svc::DeviceStatus>(100, kSent, in));
  uint32_t ok = 0;
  uint32_t busy = 0;
  for (uint32_t i = 0; i < kSent; ++i) {
    auto frame = flood.read_frame();
    ASSERT_TRUE(frame) << "closed after " << i << " answers";
    ASSERT_EQ(frame->header.type, svc::MessageType::response);
    auto response = svc::decode_response_payload<svc::DeviceStatus>(frame->payload);
    ASSERT_TRUE(response) << response.error();
    if (response->code == CALRT_OK) {
      ++ok;
    } else {
      ASSERT_EQ(response->code, static_cast<uint32_t>(CALRT_BUSY)) << response->message;
      EXPECT_NE(response->message.find("queued for the device"), std::string::npos)
          << response->message;
      ++busy;
    }
  }
  EXPECT_EQ(ok + busy, kSent);
  EXPECT_GT(busy, 0u);
  EXPECT_GE(ok, 64u);
  EXPECT_EQ(flood.call<svc::DeviceStatus>(in).code, 0u);  // the session goes on
}

// One session's flood delays another session's call by about one of its requests, not by the
// whole flood: the device lane takes one request per session in turn. Seen on the device
// clock, without timing the host: the flood is 64 Clock_HostSpend(10 ms), so the device time
// the other session's Clock_Get reads counts the flood requests that ran before it.
TEST_F(DaemonTest, AFloodingSessionDoesNotStallAnother) {
  start();
  RawClient flood = connect();
  flood.handshake("flood");
  const uint64_t device = flood.attach();
  RawClient victim = connect();
  victim.handshake("victim");
  const uint64_t victim_device = victim.attach();  // the same device: the daemon hosts one
  svc::ClockGet::In get;
  get.device.id = device;
  const auto before = flood.call<svc::ClockGet>(get);
  ASSERT_EQ(before.code, 0u) << before.message;
  svc::ClockHostSpend::In spend;
  spend.device.id = device;
  spend.duration_ns = 10'000'000;
  constexpr uint32_t kFlood = 64;  // the session's whole queue bound
  const std::vector<uint8_t> burst = request_burst<svc::ClockHostSpend>(1000, kFlood, spend);
  // The victim's handles are its own; the clock is the device's.
  svc::ClockGet::In victim_get;
  victim_get.device.id = victim_device;
  // Both arrive while the daemon is stopped, the flood first: on waking it has both to read
  // before the flood's first request has answered.
  daemon_->stop();
  flood.send_bytes(burst);
  victim.send_request<svc::ClockGet>(1, victim_get);
  daemon_->resume();
  auto answer = victim.read_frame();
  ASSERT_TRUE(answer);
  const auto during = svc::decode_response_payload<svc::ClockGet>(answer->payload);
  ASSERT_TRUE(during) << during.error();
  ASSERT_EQ(during->code, 0u) << during->message;
  const uint64_t spent_ms = (during->out.device_time_ns - before.out.device_time_ns) / 1'000'000;
  // In arrival order the Clock_Get would run after all 64 (640 ms); taking turns, after one.
  EXPECT_LT(spent_ms, kFlood * 10 / 2) << "the victim's call ran after " << spent_ms / 10
                                       << " of the " << kFlood << " flood requests";
  RecordProperty("flood_requests_before_victim", std::to_string(spent_ms / 10));
}

namespace {

// What a process of another uid sees when it says hello through the daemon's socket:
// "welcome", "closed" (the daemon hung up unanswered), or why it could not try. The child
// uses syscalls only (the test process has threads), with the frame encoded beforehand, and
// answers through its exit status; every wait is bounded.
enum class PeerOutcome { welcome = 0, closed = 1, no_connect = 2, no_identity = 3, silent = 4 };

PeerOutcome hello_as(const fs::path& socket, uid_t uid, gid_t gid) {
  svc::Hello hello;
  hello.client_name = "other-user";
  const std::vector<uint8_t> frame =
      svc::encode_frame(svc::MessageType::hello, 0, svc::encode_payload(hello));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 ||
        ::setresuid(uid, uid, uid) != 0) {
      ::_exit(static_cast<int>(PeerOutcome::no_identity));
    }
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::_exit(static_cast<int>(PeerOutcome::no_connect));
    }
    if (::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(frame.size())) {
      ::_exit(static_cast<int>(PeerOutcome::closed));
    }
    // Frames until the welcome: keepalives are skipped, anything else ends the attempt.
    for (int frames = 0; frames < 16; ++frames) {
      uint8_t header[svc::kHeaderBytes];
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, 10000) <= 0) ::_exit(static_cast<int>(PeerOutcome::silent));
      if (::recv(fd, header, sizeof header, MSG_WAITALL) != static_cast<ssize_t>(sizeof header)) {
        ::_exit(static_cast<int>(PeerOutcome::closed));
      }
      const auto type = static_cast<uint16_t>(header[4] | (header[5] << 8));  // little-endian
      if (type == static_cast<uint16_t>(svc::MessageType::welcome)) {
        ::_exit(static_cast<int>(PeerOutcome::welcome));
      }
      if (type != static_cast<uint16_t>(svc::MessageType::keepalive)) {
        ::_exit(static_cast<int>(PeerOutcome::closed));
      }
    }
    ::_exit(static_cast<int>(PeerOutcome::silent));
  }
  int status = 0;
  for (int waited = 0; waited < 300; ++waited) {
    if (::waitpid(child, &status, WNOHANG) == child) {
      return WIFEXITED(status) ? static_cast<PeerOutcome>(WEXITSTATUS(status))
                               : PeerOutcome::silent;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return PeerOutcome::silent;
}

}  // namespace

// Peer credentials decide who may talk to the daemon, whatever the socket file's mode lets
// through: with --allow-uid the socket is 0666, and a uid not on the list is hung up on
// before it is answered.
TEST_F(DaemonTest, PeerCredentialsDecideWhoMayConnect) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as other uids";
  start({"--allow-uid", "41000", "--allow-gid", "42000"});
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  struct stat st {};
  ASSERT_EQ(::lstat(daemon_->socket().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u) << "--allow-uid opens the file; credentials decide";
  EXPECT_EQ(st.st_gid, 42000u) << "the first --allow-gid is the socket's group";
  EXPECT_EQ(hello_as(daemon_->socket(), 41000, 41000), PeerOutcome::welcome);
  EXPECT_EQ(hello_as(daemon_->socket(), 43000, 42000), PeerOutcome::welcome) << "by group";
  EXPECT_EQ(hello_as(daemon_->socket(), 65534, 65534), PeerOutcome::closed);
  // The daemon's output reaches the test through a reader thread, after the hang-up the
  // client saw: wait for the line (bounded: 5 s).
  const auto logged = [&](const std::string& text) {
    for (int i = 0; i < 100; ++i) {
      if (daemon_->output().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  EXPECT_TRUE(logged("unix connection refused: peer pid")) << daemon_->output();
  EXPECT_TRUE(logged("uid 65534 gid 65534 is neither the daemon's uid")) << daemon_->output();
  expect_alive();
}

// Device-wide calls act on every session's work: a uid that is only allowed to connect may
// use the device but not reset it, change its parallel mode or set a fault plan; a
// --control-uid and the daemon's own uid may.
TEST_F(DaemonTest, DeviceWideCallsNeedTheControlRole) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as other uids";
  start({"--allow-uid", "41000", "--control-uid", "41001"});
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  auto device_wide_codes = [](RawClient& client, uint64_t device) {
    svc::DeviceReset::In reset;
    reset.device.id = device;
    reset.level = CALRT_RESET_JOB_ABORT;
    svc::DeviceSetParallelMode::In parallel;
    parallel.device.id = device;
    parallel.enable = 1;
    svc::FaultSetPlan::In plan;
    plan.device.id = device;
    plan.plan_null = 1;
    const auto r = client.call<svc::DeviceReset>(reset);
    return std::vector<std::string>{
        std::to_string(r.code) + " " + r.message,
        std::to_string(client.call<svc::DeviceSetParallelMode>(parallel).code),
        std::to_string(client.call<svc::FaultSetPlan>(plan).code)};
  };
  const std::string denied = std::to_string(CALRT_PERMISSION_DENIED);

  RawClient user = RawClient::unix_as(daemon_->socket(), 41000, 41000);
  EXPECT_EQ(user.handshake("user").control, 0u);
  const uint64_t user_device = user.attach();
  const auto user_codes = device_wide_codes(user, user_device);
  EXPECT_EQ(user_codes[0].rfind(denied + " Device_Reset: ", 0), 0u) << user_codes[0];
  EXPECT_NE(user_codes[0].find("no control role"), std::string::npos) << user_codes[0];
  EXPECT_EQ(user_codes[1], denied);
  EXPECT_EQ(user_codes[2], denied);
  // Its own device calls still work.
  svc::DeviceStatus::In status;
  status.device.id = user_device;
  EXPECT_EQ(user.call<svc::DeviceStatus>(status).code, 0u);

  RawClient controller = RawClient::unix_as(daemon_->socket(), 41001, 41001);
  EXPECT_EQ(controller.handshake("controller").control, 1u);
  const auto controller_codes = device_wide_codes(controller, controller.attach());
  EXPECT_EQ(controller_codes, (std::vector<std::string>{"0 ", "0", "0"}));

  RawClient own = connect();
  EXPECT_EQ(own.handshake("own").control, 1u);
  expect_alive();
}

// Without --allow-*, the socket stays 0600: another uid cannot even connect.
TEST_F(DaemonTest, AnotherUidCannotConnectByDefault) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as other uids";
  start();
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  EXPECT_EQ(hello_as(daemon_->socket(), 65534, 65534), PeerOutcome::no_connect);
  expect_alive();
}

// A uid that may not connect, on a socket every local user can reach, opens 2000
// connections: the daemon refuses every one and logs one line for it (741,718 connections
// in 15 s wrote 152 MB of warnings before), and still serves.
TEST_F(DaemonTest, AFloodOfRefusedConnectionsLogsOneLine) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as other uids";
  start({"--allow-uid", "4242"});
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, daemon_->socket().c_str(), sizeof addr.sun_path - 1);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      ::_exit(3);
    }
    int connected = 0;
    for (int i = 0; i < 2000; ++i) {
      const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        ++connected;
      }
      if (fd >= 0) ::close(fd);
    }
    ::_exit(connected == 2000 ? 0 : 4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the flood could not connect as uid 65534";
  expect_alive();  // accepted after the flood: every refusal was handled before it
  const std::string output = daemon_->output();
  size_t lines = 0;
  for (size_t at = output.find("connection refused"); at != std::string::npos;
       at = output.find("connection refused", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << output.substr(0, 2000);
}

TEST(DaemonStartup, RefusesAPathThatIsNotASocket) {
  const fs::path dir = scratch("-file");
  const fs::path file = dir / "not-a-socket";
  std::ofstream(file) << "keep me";
  const std::string command = std::string("timeout 20 ") + SIMDEV_EXE +
                              " serve --allow-root --socket " + file.string() + " > " +
                              (dir / "out.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::ifstream in(dir / "out.txt");
  const std::string output((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(output.find("is not a socket"), std::string::npos) << output;
  std::ifstream kept(file);
  std::string content;
  std::getline(kept, content);
  EXPECT_EQ(content, "keep me");
  fs::remove_all(dir);
}

// Exit status and output of `simdev serve ARGS` that is expected not to start.
// `seconds` bounds a daemon that starts after all (SIGTERM: it exits 0, `timeout` 124).
std::pair<int, std::string> failed_start(const fs::path& dir, const std::string& args,
                                         bool with_socket = true, int seconds = 20) {
  const std::string socket = with_socket ? "--socket " + (dir / "s.sock").string() + " " : "";
  const std::string command = "timeout " + std::to_string(seconds) + " " + SIMDEV_EXE + " serve " +
                              socket + args + " > " + (dir / "out.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(dir / "out.txt");
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
          std::string((std::istreambuf_iterator<char>(in)), {})};
}

TEST(DaemonStartup, RefusesRootWithoutAllowRoot) {
  if (::geteuid() != 0) GTEST_SKIP() << "runs as root only";
  const fs::path dir = scratch("-root");
  const auto [code, output] = failed_start(dir, "");
  EXPECT_EQ(code, 2) << output;
  EXPECT_NE(output.find("running as root"), std::string::npos) << output;
  EXPECT_NE(output.find("--allow-root"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(dir / "s.sock"));
  fs::remove_all(dir);
}

TEST(DaemonStartup, TcpNeedsAGoodTokenFile) {
  const fs::path dir = scratch("-token");
  const std::string root = ::geteuid() == 0 ? "--allow-root " : "";
  {
    const auto [code, output] = failed_start(dir, root + "--tcp 0");
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("--tcp 0 needs --token-file"), std::string::npos) << output;
  }
  const std::string secret = "a-secret-of-thirty-two-characters";
  const fs::path token = dir / "token";
  std::ofstream(token) << secret << "\n";
  struct Case {
    std::string what;
    std::string file;
    std::function<void()> arrange;
    std::string expected;
  };
  std::vector<Case> cases = {
      {"readable by others", "token", [&] { fs::permissions(token, fs::perms(0644)); },
       "mode 0644 lets other users read it"},
      {"a symbolic link", "link",
       [&] {
         fs::permissions(token, fs::perms(0600));
         fs::create_symlink(token, dir / "link");
       },
       "Too many levels of symbolic links"},
      {"too short", "short",
       [&] {
         std::ofstream(dir / "short") << "short\n";
         fs::permissions(dir / "short", fs::perms(0600));
       },
       "its first line has 5 characters; a token needs at least 16"},
      {"too large", "large",
       [&] {
         std::ofstream(dir / "large") << std::string(5000, 'x');
         fs::permissions(dir / "large", fs::perms(0600));
       },
       "5000 bytes, more than a token file's 4096"},
      {"a directory", "directory", [&] { fs::create_directory(dir / "directory"); },
       "not a regular file"},
  };
  if (::geteuid() == 0) {
    cases.push_back({"another uid's", "foreign",
                     [&] {
                       std::ofstream(dir / "foreign") << secret << "\n";
                       fs::permissions(dir / "foreign", fs::perms(0600));
                       ASSERT_EQ(::chown((dir / "foreign").c_str(), 65534, 65534), 0);
                     },
                     "owned by uid 65534, not by the daemon's uid 0"});
  }
  for (const Case& c : cases) {
    c.arrange();
    const std::string path = (dir / c.file).string();
    const auto [code, output] = failed_start(dir, root + "--tcp 0 --token-file " + path);
    EXPECT_EQ(code, 1) << c.what << ": " << output;
    EXPECT_NE(output.find("--token-file " + path), std::string::npos) << c.what << ": " << output;
    EXPECT_NE(output.find(c.expected), std::string::npos) << c.what << ": " << output;
    EXPECT_EQ(output.find(secret), std::string::npos) << c.what << ": shows the token";
  }
  fs::remove_all(dir);
}

// Without --socket the socket goes into the daemon's own directory: created 0700 (0711 when
// other uids are allowed, search only), refused when it is anyone else's or wider.
TEST(DaemonStartup, RuntimeDirIsTheDaemonsOwn) {
  const fs::path dir = scratch("-runtime");
  const std::string root = ::geteuid() == 0 ? "--allow-root " : "";
  const fs::path fresh = dir / "fresh";
  const fs::path shared = dir / "shared";
  for (const auto& [path, extra, mode] :
       {std::tuple{fresh, std::string(), 0700u},
        std::tuple{shared, std::string("--allow-uid 41000 "), 0711u}}) {
    const auto [code, output] =
        failed_start(dir, root + extra + "--runtime-dir " + path.string(), false, 1);
    EXPECT_EQ(code, 124) << "it listened until the timeout\n" << output;
    EXPECT_NE(output.find("listening on unix:" + (path / "calrt.sock").string()), std::string::npos)
        << output;
    struct stat st {};
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, mode) << path;
  }
  const fs::path wide = dir / "wide";
  fs::create_directories(wide);
  fs::permissions(wide, fs::perms(0755));
  const fs::path link = dir / "link";
  fs::create_directory_symlink(fresh, link);
  struct Case {
    fs::path dir;
    std::string expected;
  };
  const fs::path file = dir / "file";
  std::ofstream(file) << "not a directory";
  std::vector<Case> cases = {{wide, "mode 0755 lets other users list or change it"},
                             {link, "a symbolic link"},
                             {dir / "no" / "parent", "cannot create it"},
                             {file, "not a directory"}};
  if (::geteuid() == 0) {
    const fs::path foreign = dir / "foreign";
    fs::create_directory(foreign);
    fs::permissions(foreign, fs::perms(0700));
    ASSERT_EQ(::chown(foreign.c_str(), 65534, 65534), 0);
    cases.push_back({foreign, "owned by uid 65534, not by the daemon's uid 0"});
  }
  for (const Case& c : cases) {
    const auto [code, output] = failed_start(dir, root + "--runtime-dir " + c.dir.string(), false);
    EXPECT_EQ(code, 1) << c.dir << ": " << output;
    EXPECT_NE(output.find("--runtime-dir " + c.dir.string() + ": " + c.expected), std::string::npos)
        << output;
  }
  EXPECT_FALSE(fs::exists(wide / "calrt.sock"));
  fs::remove_all(dir);
}

TEST(DaemonStartup, ReplacesAStaleSocket) {
  const fs::path dir = scratch("-stale");
  const fs::path path = dir / "stale.sock";
  {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ::close(fd);  // the file stays, nobody listens
  }
  // Started in the background; stopped by SIGTERM once it says it listens (a fixed delay
  // before the signal would race the daemon's start on a loaded machine).
  const fs::path out = dir / "out.txt";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execl(SIMDEV_EXE, SIMDEV_EXE, "serve", "--socket", path.c_str(), "--allow-root", nullptr);
    ::_exit(127);
  }
  auto output = [&] {
    std::ifstream in(out);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (output().find("listening on unix:") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  const auto exit_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= exit_deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL() << "simdev serve did not exit within 10 s of SIGTERM:\n" << output();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(WIFEXITED(status)) << output();
  EXPECT_EQ(WEXITSTATUS(status), 0) << output();
  EXPECT_NE(output().find("listening on unix:" + path.string()), std::string::npos) << output();
  EXPECT_FALSE(fs::exists(path));
  fs::remove_all(dir);
}
