// One socket to `simdev serve` for one client device (PROTOCOL.md, "Connection"): connect
// with a bounded timeout, the hello/welcome handshake, then calls. The threads waiting for
// answers read the socket themselves, one at a time: the one holding the read turn reads
// frames until its own answer has come, handing other callers theirs, and then passes the
// turn on. A caller that reads its own answer is woken once, by the kernel; a reader thread
// handing answers over would cost two more wake-ups per call. While nobody calls, a keeper
// thread reads the daemon's keepalives once per keepalive period. Liveness: anything heard
// from the daemon (keepalive, response) renews it; nothing heard for the liveness bound, EOF,
// an error or a protocol violation marks the connection lost, which fails every outstanding
// call at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "simdev/device/base/status.hpp"
#include "simdev/service/protocol.hpp"

namespace simdev::service::client {

struct ConnectOptions {
  std::string endpoint;  // unix:PATH or tcp:HOST:PORT
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds liveness{2000};
  // Keep trying until connect_timeout while nobody listens (a daemon being restarted).
  bool retry_until_timeout = false;
};

class Connection {
 public:
  // Connects and completes the handshake. DEVICE_LOST when nobody answers in time; the
  // daemon's code and message when it refuses (e.g. BUSY at its client limit).
  static Expected<std::shared_ptr<Connection>> open(const ConnectOptions& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends one request payload and waits for its response payload. DEVICE_LOST when the
  // connection is or becomes lost before the answer.
  Expected<std::vector<uint8_t>> call(std::span<const uint8_t> request_payload);

  // call() in two halves, for a caller that must order its sends with other threads' (held
  // buffer calls) without holding its lock through the wait.
  struct Sent {
    uint32_t id = 0;
    std::shared_ptr<void> pending;
  };
  Expected<Sent> send_request(std::span<const uint8_t> request_payload);
  Expected<std::vector<uint8_t>> await_response(const Sent& sent);

  bool lost() const;
  std::string lost_reason() const;
  const Welcome& welcome() const { return welcome_; }
  std::chrono::milliseconds liveness() const { return liveness_; }
  const std::string& endpoint() const { return endpoint_; }

  // Shuts the socket down, joins the keeper, waits for the read turn to be given back and
  // closes the socket. Idempotent.
  void close();

 private:
  struct Pending {
    bool done = false;
    std::vector<uint8_t> payload;
  };
  using Clock = std::chrono::steady_clock;

  Connection(int fd, std::string endpoint) : fd_(fd), endpoint_(std::move(endpoint)) {}

  Status handshake(Clock::time_point deadline);
  // Reads exactly n bytes, those buffered first; a zero deadline means the liveness
  // deadline. Only the holder of the read turn (or the handshake) reads.
  Status read_exact(uint8_t* data, size_t n, Clock::time_point handshake_deadline);
  Status read_frame(FrameHeader& header, std::vector<uint8_t>& payload,
                    Clock::time_point handshake_deadline);
  // Reads one frame and acts on it, holding the read turn: a response goes to its caller, a
  // keepalive only renews the liveness. An error (goodbye, EOF, silence, a protocol
  // violation) is for the caller to mark the connection lost with.
  Status read_and_dispatch();
  // Reads what has arrived while nobody calls, then checks the liveness bound.
  Status drain_idle();
  Status send_frame(MessageType type, uint32_t request_id, std::span<const uint8_t> payload);
  void keeper_loop();
  // Takes the read turn (`lock` held on entry and on return), runs `read` without the lock,
  // marks the connection lost if it fails, and gives the turn back, waking the waiters.
  void read_in_turn(std::unique_lock<std::mutex>& lock, Status (Connection::*read)());
  void mark_lost(std::string reason);
  Error lost_fault() const;

  int fd_ = -1;
  std::string endpoint_;
  Welcome welcome_;
  std::chrono::milliseconds liveness_{2000};
  // The read turn's alone: when the daemon was last heard, and bytes read past the last frame
  // (a recv takes what has arrived, often a frame and the next one's start).
  Clock::time_point last_heard_{};
  std::vector<uint8_t> inbox_;
  size_t inbox_begin_ = 0;
  size_t inbox_end_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool lost_ = false;
  std::string lost_reason_;
  bool closed_ = false;
  uint32_t next_request_id_ = 1;
  std::map<uint32_t, std::shared_ptr<Pending>> pending_;
  bool reading_ = false;               // a thread holds the read turn
  std::condition_variable keeper_cv_;  // the keeper's own, so that calls never wake it

  std::mutex send_mutex_;
  std::thread keeper_;
};

}  // namespace simdev::service::client
