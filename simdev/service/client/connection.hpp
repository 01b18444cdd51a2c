// One socket to `simdev serve` for one client device (PROTOCOL.md, "Connection"): connect
// with a bounded timeout, the hello/welcome handshake, then a reader thread that hands each
// response to the request with its id. Liveness: anything heard from the daemon (keepalive,
// response) renews it; nothing heard for the liveness bound, EOF, an error or a protocol
// violation marks the connection lost, which fails every outstanding call at once.
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

#include "simdev/service/client/fault.hpp"
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

  // Closes the socket and joins the reader. Idempotent; never called by the reader.
  void close();

 private:
  struct Pending {
    bool done = false;
    std::vector<uint8_t> payload;
  };
  using Clock = std::chrono::steady_clock;

  Connection(int fd, std::string endpoint) : fd_(fd), endpoint_(std::move(endpoint)) {}

  Status handshake(Clock::time_point deadline);
  // Reads exactly n bytes; a zero deadline means the liveness deadline of the reader.
  Status read_exact(uint8_t* data, size_t n, Clock::time_point handshake_deadline);
  Status read_frame(FrameHeader& header, std::vector<uint8_t>& payload,
                    Clock::time_point handshake_deadline);
  Status send_frame(MessageType type, uint32_t request_id, std::span<const uint8_t> payload);
  void reader_loop();
  void mark_lost(std::string reason);
  Fault lost_fault() const;

  int fd_ = -1;
  std::string endpoint_;
  Welcome welcome_;
  std::chrono::milliseconds liveness_{2000};
  Clock::time_point last_heard_{};  // the reader's alone

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool lost_ = false;
  std::string lost_reason_;
  bool closed_ = false;
  uint32_t next_request_id_ = 1;
  std::map<uint32_t, std::shared_ptr<Pending>> pending_;

  std::mutex send_mutex_;
  std::thread reader_;
};

}  // namespace simdev::service::client
