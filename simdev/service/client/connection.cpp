#include "simdev/service/client/connection.hpp"
#include "simdev/service/endpoint.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace simdev::service::client {
namespace {

using Clock = std::chrono::steady_clock;

int ms_until(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  // Rounded up so that a poll never returns just before the deadline and spins.
  return static_cast<int>(std::clamp<int64_t>(left + 1, 0, 60'000));
}

std::string errno_text(int error) { return std::strerror(error); }

// Bytes a recv into the inbox asks for: every frame of a decode step but a large tensor's
// fits, header and payload in one recv. A larger remainder is read straight into its place.
constexpr size_t kInboxBytes = 64 * 1024;

// The process at the other end of a Unix socket must run as this process's uid, as root, or
// as the uid in CALRT_DAEMON_UID: in a directory others can write, another user may have
// taken the path first, and the hello (the client's name and config) would go to them. The
// kernel's peer credentials are checked on the connected socket itself, so swapping the
// file after the check changes nothing.
Status check_daemon_owner(int fd, const std::string& endpoint) {
  ucred peer{};
  socklen_t size = sizeof peer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 || size != sizeof peer) {
    return fail(CALRT_DEVICE_LOST,
                "service endpoint " + endpoint +
                    ": cannot read the listener's credentials: " + errno_text(errno));
  }
  const uid_t self = ::geteuid();
  std::optional<uid_t> trusted;
  if (const char* text = std::getenv("CALRT_DAEMON_UID"); text != nullptr && *text != '\0') {
    char* end = nullptr;
    const unsigned long value = std::strtoul(text, &end, 10);
    if (*end != '\0' || value > 4294967294ul) {
      return fail(CALRT_INVALID_ARGUMENT,
                  std::string("CALRT_DAEMON_UID='") + text + "' is not a uid");
    }
    trusted = static_cast<uid_t>(value);
  }
  if (peer.uid == self || peer.uid == 0 || (trusted && peer.uid == *trusted)) {
    return {};
  }
  // A request-class code: retrying until the connect timeout would not change the owner.
  return fail(CALRT_INVALID_ARGUMENT,
              "service endpoint " + endpoint + " is served by uid " + std::to_string(peer.uid) +
                  " (pid " + std::to_string(peer.pid) + "), not by this user (uid " +
                  std::to_string(self) +
                  ") or root: refusing to talk to another user's listener (set "
                  "CALRT_DAEMON_UID to trust that uid)");
}

// The token a TCP endpoint needs (PROTOCOL.md, "Security model"): the first line of the file
// CALRT_TOKEN_FILE names, the daemon's --token-file. Empty when the variable is not set: the
// daemon then refuses the hello and says what is missing.
Expected<std::string> tcp_token() {
  const char* path = std::getenv("CALRT_TOKEN_FILE");
  if (path == nullptr || *path == '\0') return std::string();
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return fail(CALRT_INVALID_ARGUMENT,
                std::string("CALRT_TOKEN_FILE=") + path + ": " + errno_text(errno));
  }
  std::string text(4097, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > 4096) {
    return fail(CALRT_INVALID_ARGUMENT, std::string("CALRT_TOKEN_FILE=") + path +
                                            ": more than 4096 bytes, not a token file");
  }
  text.resize(got);
  return text.substr(0, text.find_first_of("\r\n"));
}

// A connected socket (blocking), or the reason why not.
Expected<int> connect_once(const std::string& endpoint, Clock::time_point deadline) {
  sockaddr_storage address{};
  socklen_t address_size = 0;
  int family = AF_UNIX;
  auto parsed = parse_endpoint(endpoint);
  if (!parsed) {
    return fail(CALRT_INVALID_ARGUMENT, parsed.error());
  }
  if (parsed->kind == Endpoint::Kind::unix_socket) {
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    std::memcpy(un.sun_path, parsed->path.data(), parsed->path.size());
    std::memcpy(&address, &un, sizeof un);
    address_size = static_cast<socklen_t>(sizeof un);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(parsed->host.c_str(), parsed->port.c_str(), &hints, &found);
        rc != 0 || found == nullptr) {
      return fail(CALRT_INVALID_ARGUMENT,
                  "service endpoint '" + endpoint + "': " + std::string(gai_strerror(rc)));
    }
    std::memcpy(&address, found->ai_addr, found->ai_addrlen);
    address_size = found->ai_addrlen;
    family = AF_INET;
    freeaddrinfo(found);
  }

  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    return fail(CALRT_DEVICE_LOST, "socket: " + errno_text(errno));
  }
  auto give_up = [&](const std::string& why) {
    ::close(fd);
    return fail(CALRT_DEVICE_LOST, "no daemon answers at " + endpoint + ": " + why);
  };
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), address_size) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) {
      return give_up("connect: " + errno_text(errno));
    }
    pollfd pfd{fd, POLLOUT, 0};
    int ready = 0;
    do {
      ready = ::poll(&pfd, 1, ms_until(deadline));
    } while (ready < 0 && errno == EINTR);
    if (ready <= 0) {
      return give_up("connect timed out");
    }
    int error = 0;
    socklen_t size = sizeof error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0) {
      return give_up("connect: " + errno_text(error));
    }
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  if (family == AF_UNIX) {
    if (auto trusted = check_daemon_owner(fd, endpoint); !trusted) {
      ::close(fd);
      return tl::unexpected(trusted.error());
    }
  }
  if (family == AF_INET) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

std::string client_name() {
  char name[64] = {};
  if (FILE* f = std::fopen("/proc/self/comm", "r")) {
    if (std::fgets(name, sizeof name, f) == nullptr) name[0] = '\0';
    std::fclose(f);
  }
  std::string text(name);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "calrt client" : text;
}

}  // namespace

Expected<std::shared_ptr<Connection>> Connection::open(const ConnectOptions& options) {
  const auto deadline = Clock::now() + options.connect_timeout;
  Expected<int> fd = connect_once(options.endpoint, deadline);
  // A daemon being restarted has no socket for a moment: retry at a modest pace until the
  // deadline, never in a tight loop.
  while (!fd && options.retry_until_timeout && fd.error().code == CALRT_DEVICE_LOST &&
         Clock::now() + std::chrono::milliseconds(50) < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    fd = connect_once(options.endpoint, deadline);
  }
  if (!fd) {
    return tl::unexpected(fd.error());
  }
  std::shared_ptr<Connection> connection(new Connection(*fd, options.endpoint));
  connection->liveness_ = options.liveness;
  // A daemon that stops reading must not block a sender forever.
  timeval send_timeout{};
  send_timeout.tv_sec = static_cast<time_t>(options.liveness.count() / 1000);
  send_timeout.tv_usec = static_cast<suseconds_t>((options.liveness.count() % 1000) * 1000);
  ::setsockopt(*fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
  if (Status ok = connection->handshake(deadline); !ok) {
    ::close(connection->fd_);
    connection->fd_ = -1;
    connection->closed_ = true;
    return tl::unexpected(ok.error());
  }
  connection->last_heard_ = Clock::now();
  connection->keeper_ = std::thread([c = connection.get()] { c->keeper_loop(); });
  return connection;
}

Connection::~Connection() { close(); }

Status Connection::handshake(Clock::time_point deadline) {
  Hello hello;
  hello.client_name = client_name();
  hello.client_pid = static_cast<uint32_t>(::getpid());
  if (auto parsed = parse_endpoint(endpoint_); parsed && parsed->kind == Endpoint::Kind::tcp) {
    auto token = tcp_token();
    if (!token) return tl::unexpected(token.error());
    hello.token = std::move(*token);
  }
  const std::vector<uint8_t> payload = encode_payload(hello);
  if (Status sent = send_frame(MessageType::hello, 0, payload); !sent) {
    return fail(CALRT_DEVICE_LOST,
                "no daemon answers at " + endpoint_ + ": " + sent.error().message);
  }
  FrameHeader header;
  std::vector<uint8_t> answer;
  if (Status got = read_frame(header, answer, deadline); !got) {
    return fail(CALRT_DEVICE_LOST,
                "no daemon answers at " + endpoint_ + ": " + got.error().message);
  }
  if (header.type == MessageType::refused) {
    auto notice = decode_payload<Notice>(answer, "refused");
    if (!notice) {
      return fail(CALRT_INTERNAL, "daemon at " + endpoint_ + ": " + notice.error());
    }
    return fail(static_cast<CalrtCode>(notice->code),
                "daemon at " + endpoint_ + " refused the connection: " + notice->message);
  }
  if (header.type != MessageType::welcome) {
    return fail(CALRT_INTERNAL, "daemon at " + endpoint_ + " answered hello with message type " +
                                    std::to_string(static_cast<int>(header.type)));
  }
  auto welcome = decode_payload<Welcome>(answer, "welcome");
  if (!welcome) {
    return fail(CALRT_INTERNAL, "daemon at " + endpoint_ + ": " + welcome.error());
  }
  if (welcome->protocol_major != kProtocolMajor || welcome->abi_major != CALRT_ABI_MAJOR) {
    return fail(
        CALRT_CALBIN_MISMATCH,
        "daemon at " + endpoint_ + " speaks protocol " + std::to_string(welcome->protocol_major) +
            " with ABI major " + std::to_string(welcome->abi_major) + ", this client protocol " +
            std::to_string(kProtocolMajor) + " with ABI major " + std::to_string(CALRT_ABI_MAJOR));
  }
  welcome_ = *welcome;
  // The bound must leave room for a few missed keepalives, or a busy daemon looks dead.
  liveness_ = std::max(liveness_, std::chrono::milliseconds(4 * uint64_t{welcome_.keepalive_ms}));
  return {};
}

Status Connection::read_exact(uint8_t* data, size_t n, Clock::time_point handshake_deadline) {
  const size_t buffered = std::min(n, inbox_end_ - inbox_begin_);
  if (buffered > 0) {
    std::memcpy(data, inbox_.data() + inbox_begin_, buffered);
    inbox_begin_ += buffered;
    data += buffered;
    n -= buffered;
  }
  const bool handshake = handshake_deadline != Clock::time_point{};
  while (n > 0) {
    // Polled even past the deadline: what the daemon sent while nobody read (keepalives
    // queued during a long idle stretch) still counts as heard.
    const auto deadline = handshake ? handshake_deadline : last_heard_ + liveness_;
    pollfd pfd{fd_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, ms_until(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return fail(CALRT_DEVICE_LOST, "poll: " + errno_text(errno));
    }
    if (ready == 0) {
      if (Clock::now() >= deadline) {
        return fail(CALRT_DEVICE_LOST, handshake ? std::string("no welcome in time")
                                                 : "nothing heard from the daemon for " +
                                                       std::to_string(liveness_.count()) + " ms");
      }
      continue;
    }
    // The inbox is empty here: what it held went first.
    const bool direct = n >= kInboxBytes;
    if (!direct && inbox_.size() < kInboxBytes) {
      inbox_.resize(kInboxBytes);
    }
    const ssize_t got =
        direct ? ::recv(fd_, data, n, 0) : ::recv(fd_, inbox_.data(), kInboxBytes, 0);
    if (got == 0) {
      return fail(CALRT_DEVICE_LOST, "the daemon closed the connection");
    }
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return fail(CALRT_DEVICE_LOST, "recv: " + errno_text(errno));
    }
    last_heard_ = Clock::now();
    const size_t take = std::min(n, static_cast<size_t>(got));
    if (!direct) {
      std::memcpy(data, inbox_.data(), take);
      inbox_begin_ = take;
      inbox_end_ = static_cast<size_t>(got);
    }
    data += take;
    n -= take;
  }
  return {};
}

Status Connection::read_frame(FrameHeader& header, std::vector<uint8_t>& payload,
                              Clock::time_point handshake_deadline) {
  uint8_t head[kHeaderBytes];
  if (Status ok = read_exact(head, sizeof head, handshake_deadline); !ok) {
    return ok;
  }
  auto decoded = decode_header(head);
  if (!decoded) {
    return fail(CALRT_DEVICE_LOST, "protocol violation by the daemon: " + decoded.error());
  }
  header = *decoded;
  payload.resize(header.payload_bytes());
  return read_exact(payload.data(), payload.size(), handshake_deadline);
}

Status Connection::send_frame(MessageType type, uint32_t request_id,
                              std::span<const uint8_t> payload) {
  const std::vector<uint8_t> frame = encode_frame(type, request_id, payload);
  std::lock_guard lock(send_mutex_);
  // Closed after this caller's check of closed_: the number may name another file by now.
  if (fd_ < 0) {
    return fail(CALRT_DEVICE_LOST, "the device was closed");
  }
  size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      return fail(CALRT_DEVICE_LOST, error == EAGAIN || error == EWOULDBLOCK
                                         ? std::string("the daemon stopped reading")
                                         : "send: " + errno_text(error));
    }
    sent += static_cast<size_t>(n);
  }
  return {};
}

Status Connection::read_and_dispatch() {
  FrameHeader header;
  std::vector<uint8_t> payload;
  if (Status got = read_frame(header, payload, Clock::time_point{}); !got) {
    return got;
  }
  switch (header.type) {
    case MessageType::keepalive:
      return {};
    case MessageType::response: {
      std::lock_guard lock(mutex_);
      auto it = pending_.find(header.request_id);
      if (it != pending_.end()) {  // else the caller gave up on it (the connection was closing)
        it->second->payload = std::move(payload);
        it->second->done = true;
        pending_.erase(it);
      }
      return {};
    }
    case MessageType::goodbye: {
      auto notice = decode_payload<Notice>(payload, "goodbye");
      return fail(CALRT_DEVICE_LOST, notice ? "the daemon said goodbye: " + notice->message
                                            : "the daemon said goodbye (" + notice.error() + ")");
    }
    default:
      return fail(CALRT_DEVICE_LOST, "protocol violation by the daemon: message type " +
                                         std::to_string(static_cast<int>(header.type)) +
                                         " after the handshake");
  }
}

Status Connection::drain_idle() {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (!pending_.empty() || lost_) {
        return {};  // a caller is waiting and reads from here on
      }
    }
    if (inbox_begin_ == inbox_end_) {
      pollfd pfd{fd_, POLLIN, 0};
      const int ready = ::poll(&pfd, 1, 0);
      if (ready < 0 && errno != EINTR) {
        return fail(CALRT_DEVICE_LOST, "poll: " + errno_text(errno));
      }
      if (ready <= 0) {
        break;
      }
    }
    if (Status got = read_and_dispatch(); !got) {
      return got;
    }
  }
  if (Clock::now() >= last_heard_ + liveness_) {
    return fail(CALRT_DEVICE_LOST,
                "nothing heard from the daemon for " + std::to_string(liveness_.count()) + " ms");
  }
  return {};
}

void Connection::keeper_loop() {
  // Often enough that keepalives never pile up and silence is noticed within the bound.
  const auto period = std::clamp(std::chrono::milliseconds(welcome_.keepalive_ms),
                                 std::chrono::milliseconds(10), liveness_ / 2);
  std::unique_lock lock(mutex_);
  while (!lost_ && !closed_) {
    keeper_cv_.wait_for(lock, period);
    if (lost_ || closed_ || reading_ || !pending_.empty()) {
      continue;  // a caller reads
    }
    read_in_turn(lock, &Connection::drain_idle);
  }
}

void Connection::read_in_turn(std::unique_lock<std::mutex>& lock, Status (Connection::*read)()) {
  reading_ = true;
  lock.unlock();
  if (const Status got = (this->*read)(); !got) {
    mark_lost(got.error().message);
  }
  lock.lock();
  reading_ = false;
  cv_.notify_all();  // answers handed over, or the turn free for another waiter
}

void Connection::mark_lost(std::string reason) {
  std::lock_guard lock(mutex_);
  if (!lost_) {
    lost_ = true;
    lost_reason_ = std::move(reason);
    // Wakes a sender blocked on a full socket buffer too.
    ::shutdown(fd_, SHUT_RDWR);
  }
  cv_.notify_all();
  keeper_cv_.notify_all();
}

bool Connection::lost() const {
  std::lock_guard lock(mutex_);
  return lost_;
}

std::string Connection::lost_reason() const {
  std::lock_guard lock(mutex_);
  return lost_reason_;
}

Error Connection::lost_fault() const {
  return Error{CALRT_DEVICE_LOST, "the device at " + endpoint_ + " is lost: " + lost_reason_};
}

Expected<std::vector<uint8_t>> Connection::call(std::span<const uint8_t> request_payload) {
  auto sent = send_request(request_payload);
  if (!sent) {
    return tl::unexpected(sent.error());
  }
  return await_response(*sent);
}

Expected<Connection::Sent> Connection::send_request(std::span<const uint8_t> request_payload) {
  auto pending = std::make_shared<Pending>();
  uint32_t id = 0;
  {
    std::lock_guard lock(mutex_);
    if (lost_ || closed_) {
      return tl::unexpected(lost_fault());
    }
    do {
      id = next_request_id_++;
    } while (id == 0 || pending_.count(id) != 0);
    pending_.emplace(id, pending);
  }
  if (Status sent = send_frame(MessageType::request, id, request_payload); !sent) {
    mark_lost(sent.error().message);
  }
  return Sent{id, pending};
}

Expected<std::vector<uint8_t>> Connection::await_response(const Sent& sent) {
  const uint32_t id = sent.id;
  const auto pending = std::static_pointer_cast<Pending>(sent.pending);
  std::unique_lock lock(mutex_);
  // The first waiter takes the read turn and reads until its answer has come; the others wait
  // for their answer or for the turn. Every read ends by the liveness bound (EOF at once); the
  // timed wait only re-checks, it never spins.
  while (!pending->done && !lost_) {
    if (reading_) {
      cv_.wait_for(lock, liveness_);
      continue;
    }
    read_in_turn(lock, &Connection::read_and_dispatch);
  }
  if (!pending->done) {
    pending_.erase(id);
    return tl::unexpected(lost_fault());
  }
  return std::move(pending->payload);
}

void Connection::close() {
  {
    std::lock_guard lock(mutex_);
    if (closed_) {
      return;
    }
    closed_ = true;
    if (!lost_) {
      lost_ = true;
      lost_reason_ = "the device was closed";
    }
    if (fd_ >= 0) {
      ::shutdown(fd_, SHUT_RDWR);  // a read in progress ends at once
    }
    cv_.notify_all();
    keeper_cv_.notify_all();
  }
  if (keeper_.joinable()) {
    keeper_.join();
  }
  {
    std::unique_lock lock(mutex_);
    while (reading_) {
      cv_.wait_for(lock, liveness_);
    }
  }
  // Under the send lock: a sender that passed its closed_ check before close() began must not
  // send on the number after it is closed (and perhaps reused by another open). A send
  // blocked on a full socket ended at the shutdown above.
  std::lock_guard send_lock(send_mutex_);
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace simdev::service::client
