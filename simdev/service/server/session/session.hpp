// session.hpp: one client connection. Runs the handshake state machine, splits frames and
// checks their order, sends device calls to the shared device lane and Job_Wait to the
// session's own wait lane, writes responses in order through a write queue, and releases
// everything the session holds on the device when the connection ends.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "simdev/service/server/access/tcp_token.hpp"
#include "simdev/service/server/asio.hpp"
#include "simdev/service/server/calls/device_host.hpp"
#include "simdev/service/server/calls/dispatch.hpp"
#include "simdev/service/server/session/frame_splitter.hpp"
#include "simdev/service/server/session/lane.hpp"
#include "simdev/service/server/session/quiet_point.hpp"

namespace simdev::service::server {

class Session;

// What the daemon knows of a connection before it says anything (PROTOCOL.md, "Security
// model").
struct Admission {
  std::string peer;          // "unix" or "tcp", for the log
  bool needs_token = false;  // TCP: the hello must carry the --token-file secret
  bool control = false;      // may make device-wide calls (once the token, if needed, matched)
};

// What every session shares with the daemon. Counters without atomics are touched only on
// the io thread.
struct ServerShared {
  asio::io_context& io;
  const CalrtApi* api;
  DeviceHost& host;
  Lane& device_lane;
  uint32_t keepalive_ms = 250;
  uint32_t max_clients = 16;
  uint32_t max_connections = 64;
  std::chrono::milliseconds handshake_timeout{5000};
  size_t connections = 0;  // sessions not yet closed, admitted or not
  size_t admitted = 0;
  uint64_t sessions_served = 0;
  size_t peak_sessions = 0;
  uint64_t protocol_errors = 0;
  std::atomic<size_t> cleanups_pending{0};
  std::function<void(const std::shared_ptr<Session>&)> on_closed;
  std::chrono::milliseconds configure_wait{10000};
  std::chrono::milliseconds idle_timeout{0};          // 0: none
  std::vector<std::filesystem::path> calbin_roots{};  // canonical
  std::optional<TokenDigest> token{};                 // of --token-file
  // Device lane only.
  QuietPointQueue quiet{[this] { return !host.running(); }};
  // Held shared by each wait lane while its Job_Wait is in the runtime, where it may hold the
  // device for as long as jobs compute (on a virtual clock, every job queued before its own).
  // The io thread runs a short call itself only on a virtual clock (DeviceHost::virtual_clock)
  // and when it can take this exclusively, without waiting: otherwise the call could block the
  // io thread on the device, or compute there, and every session's reads, answers and
  // keepalives would stop with it.
  std::shared_mutex waits_in_runtime{};
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  using Socket = asio::generic::stream_protocol::socket;

  Session(ServerShared& shared, Socket socket, Admission admission);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void start();
  void send_keepalive();
  // The daemon is going away: goodbye DEVICE_LOST, then close.
  void shutdown_notice();
  // Closes at once (no goodbye); releases the session's device objects.
  void close_now();
  bool closed() const { return phase_ == Phase::closed; }

 private:
  enum class Phase { awaiting_hello, welcomed, closing, closed };
  enum class Attach { none, pending, attached, failed, detached };

  void read_more();
  void start_handshake_timer();
  void arm_idle_timer(std::chrono::milliseconds after);
  void on_frame(Frame& frame);
  void on_hello(const Frame& frame);
  void on_request(Frame& frame);
  void violation(const std::string& message);
  void refuse(uint32_t code, const std::string& message);
  void goodbye(uint32_t code, const std::string& message);
  void send(std::vector<uint8_t> frame);
  void write_next();
  void close_after_flush();
  static void deliver(std::shared_ptr<Session> self, uint32_t request_id, Outcome outcome);
  void on_response(uint32_t request_id, Outcome outcome);
  void start_cleanup();
  void run_on_device_lane(Call call, QuietPointQueue::Run work);
  DispatchContext dispatch_context(bool on_wait_lane);
  // On the io thread: runs `work` on the session's wait lane (made on the first wait).
  void post_wait(std::function<void()> work);
  // Device-lane work of this session goes to the lane one item at a time: the next is posted
  // when the one before has answered. Each session then has at most one item in the lane's
  // FIFO, so sessions take turns however many requests one of them pipelines.
  void post_next_device_work();
  // After something that may leave the device quiet: lets waiting configures run.
  static void poll_quiet_point(const std::shared_ptr<Session>& self);

  ServerShared& shared_;
  Socket socket_;
  asio::steady_timer close_timer_;
  asio::steady_timer handshake_timer_;
  asio::steady_timer idle_timer_;
  // The last frame read or response sent (--idle-timeout-ms).
  std::chrono::steady_clock::time_point last_activity_ = std::chrono::steady_clock::now();
  std::string peer_;
  bool needs_token_;
  bool control_;
  uint64_t session_id_;
  std::string client_name_;
  std::array<uint8_t, 64 * 1024> read_buffer_{};
  FrameSplitter splitter_;
  Phase phase_ = Phase::awaiting_hello;
  Attach attach_ = Attach::none;
  bool admitted_ = false;
  std::set<uint32_t> outstanding_;
  struct DeviceWork {
    uint32_t request_id;
    size_t bytes;  // of the request's payload, counted against kMaxQueuedBytes
    std::function<void()> run;
    bool short_call = false;  // may run on the io thread when the lane is idle
  };
  std::deque<DeviceWork> device_queue_;  // io thread: not yet on the device lane
  size_t device_queue_bytes_ = 0;
  std::optional<uint32_t> on_device_lane_;  // the request the lane holds for this session
  std::deque<std::vector<uint8_t>> writes_;
  bool writing_ = false;
  bool close_after_flush_ = false;

  // Device-lane side: the session's objects; the wait lane is made on the first Job_Wait
  // and stopped by the cleanup on the device lane.
  SessionObjects objects_;
  std::unique_ptr<Lane> wait_lane_;
};

}  // namespace simdev::service::server
