#include "simdev/service/server/session/session.hpp"

#include <chrono>
#include <cstdio>
#include <utility>

#include <spdlog/spdlog.h>

#include "simdev/service/protocol.hpp"

namespace simdev::service::server {
namespace {

// A goodbye or refusal is flushed before the close; a client that does not read is cut off
// after this long.
constexpr auto kCloseFlushBound = std::chrono::milliseconds(1000);
// Keepalives are skipped while this many frames wait to be written: a client that does
// not read must not make the daemon buffer without bound.
constexpr size_t kKeepaliveQueueBound = 64;
// A hello is a few dozen bytes: a peer that has not said it may not make the daemon buffer
// more than this (PROTOCOL.md, "Limits").
constexpr size_t kPreHelloPayloadLimit = 4096;
// Requests of one session waiting for the device lane, and their bytes: beyond either, a
// request is answered BUSY at once. A client that waits for its answers never has more than
// a few queued; 64 leaves pipelining room.
constexpr size_t kMaxQueuedRequests = 64;
constexpr size_t kMaxQueuedBytes = size_t{256} << 20;
// How long a wait lane waits for the device lane to fetch a completed job's outputs; past it
// the client maps them with calls of its own.
constexpr auto kWaitLaneFetchBound = std::chrono::milliseconds(100);

// Calls that return at once whatever the device does (no file read, no upload, no wait, no
// large copy): these may run on the io thread when the device lane is idle.
bool is_short_call(Call call) {
  switch (call) {
    case Call::device_status:
    case Call::buffer_map:
    case Call::buffer_unmap:
    case Call::buffer_set_csr:
    case Call::buffer_get_csr:
    case Call::job_submit:
    case Call::job_status:
    case Call::job_cancel:
    case Call::job_destroy:
    case Call::kv_apply:
    case Call::kv_info:
    case Call::clock_get:
    case Call::batch:
      return true;
    default:
      return false;
  }
}

const char* type_name(MessageType type) {
  switch (type) {
    case MessageType::hello:
      return "hello";
    case MessageType::welcome:
      return "welcome";
    case MessageType::refused:
      return "refused";
    case MessageType::keepalive:
      return "keepalive";
    case MessageType::goodbye:
      return "goodbye";
    case MessageType::request:
      return "request";
    case MessageType::response:
      return "response";
  }
  return "unknown";
}

std::string hex(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

}  // namespace

Session::Session(ServerShared& shared, Socket socket, Admission admission)
    : shared_(shared),
      socket_(std::move(socket)),
      close_timer_(shared.io),
      handshake_timer_(shared.io),
      idle_timer_(shared.io),
      peer_(std::move(admission.peer)),
      needs_token_(admission.needs_token),
      control_(admission.control),
      session_id_(next_wire_id()) {
  splitter_.set_payload_limit(kPreHelloPayloadLimit);
  ++shared_.connections;
}

Session::~Session() {
  // The cleanup stopped the wait lane; this covers a session dropped at a forced exit.
  if (wait_lane_) wait_lane_->stop_and_join();
}

void Session::start() {
  spdlog::debug("session {}: connected ({})", session_id_, peer_);
  start_handshake_timer();
  read_more();
}

void Session::start_handshake_timer() {
  handshake_timer_.expires_after(shared_.handshake_timeout);
  // A weak reference: the timer must not keep a closed session alive for its duration.
  handshake_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    const auto self = weak.lock();
    if (ec || !self) return;
    const auto limit = std::to_string(self->shared_.handshake_timeout.count());
    if (self->phase_ == Phase::awaiting_hello) {
      self->refuse(CALRT_WRONG_STATE, "no hello within " + limit + " ms of connecting");
    } else if (self->phase_ == Phase::welcomed && self->attach_ == Attach::none) {
      spdlog::info("session {} ('{}', {}): no Device_Create within {} ms of connecting",
                   self->session_id_, self->client_name_, self->peer_, limit);
      self->goodbye(CALRT_WRONG_STATE, "no Device_Create within " + limit + " ms of connecting");
    }
  });
}

// --idle-timeout-ms: a session that has sent nothing and been answered nothing for that long
// (and awaits no answer) is
// told goodbye, so that a client that went away without closing (a hung process, a lost
// network namespace) does not hold a --max-clients slot and its device memory for ever. A
// session blocked in Job_Wait is waiting, not idle.
void Session::arm_idle_timer(std::chrono::milliseconds after) {
  if (shared_.idle_timeout.count() == 0) return;
  idle_timer_.expires_after(after);
  idle_timer_.async_wait([weak = weak_from_this()](std::error_code ec) {
    const auto self = weak.lock();
    if (ec || !self || self->phase_ != Phase::welcomed) return;
    const auto limit = self->shared_.idle_timeout;
    const auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - self->last_activity_);
    if (!self->outstanding_.empty()) {
      self->arm_idle_timer(limit);
    } else if (quiet < limit) {
      self->arm_idle_timer(limit - quiet);
    } else {
      spdlog::info("session {} ('{}', {}): idle for {} ms, closed (--idle-timeout-ms)",
                   self->session_id_, self->client_name_, self->peer_, quiet.count());
      self->goodbye(CALRT_WRONG_STATE, "idle for " + std::to_string(quiet.count()) +
                                           " ms: the daemon's --idle-timeout-ms is " +
                                           std::to_string(limit.count()));
    }
  });
}

void Session::read_more() {
  socket_.async_read_some(
      asio::buffer(read_buffer_), [self = shared_from_this()](std::error_code ec, size_t n) {
        if (self->phase_ == Phase::closed || self->phase_ == Phase::closing) return;
        if (ec) {
          if (self->splitter_.pending_bytes() > 0) {
            spdlog::info("session {}: connection ended inside a frame ({} bytes pending)",
                         self->session_id_, self->splitter_.pending_bytes());
          }
          self->close_now();
          return;
        }
        self->last_activity_ = std::chrono::steady_clock::now();
        self->splitter_.append(std::span<const uint8_t>(self->read_buffer_.data(), n));
        while (self->phase_ == Phase::awaiting_hello || self->phase_ == Phase::welcomed) {
          auto frame = self->splitter_.next();
          if (!frame) {
            self->violation(frame.error());
            return;
          }
          if (!*frame) break;
          self->on_frame(**frame);
        }
        if (self->phase_ == Phase::awaiting_hello || self->phase_ == Phase::welcomed) {
          self->read_more();
        }
      });
}

void Session::on_frame(Frame& frame) {
  switch (frame.header.type) {
    case MessageType::hello:
      if (phase_ != Phase::awaiting_hello) {
        violation("a second hello on this connection");
        return;
      }
      on_hello(frame);
      return;
    case MessageType::request:
      if (phase_ != Phase::welcomed) {
        violation("a request before hello");
        return;
      }
      on_request(frame);
      return;
    case MessageType::goodbye: {
      auto notice = decode_payload<Notice>(frame.payload, "goodbye");
      spdlog::debug("session {}: client said goodbye ({})", session_id_,
                    notice ? notice->message : notice.error());
      close_now();
      return;
    }
    case MessageType::welcome:
    case MessageType::refused:
    case MessageType::keepalive:
    case MessageType::response:
      violation(std::string("a ") + type_name(frame.header.type) +
                " frame, which only the daemon sends");
      return;
  }
}

void Session::on_hello(const Frame& frame) {
  auto hello = decode_payload<Hello>(frame.payload, "hello");
  if (!hello) {
    // A client of another protocol major has another hello layout; its leading magic and
    // major are where every major puts them, so it is told why instead of cut off.
    Reader reader(frame.payload);
    const uint32_t magic = reader.u32("magic");
    const uint16_t major = reader.u16("protocol_major");
    if (reader.ok() && magic == kHelloMagic && major != kProtocolMajor) {
      refuse(kAbiMismatchCode, "hello: field 'protocol_major': " + std::to_string(major) +
                                   ", the daemon speaks protocol " +
                                   std::to_string(kProtocolMajor) + "." +
                                   std::to_string(kProtocolMinor));
      return;
    }
    violation(hello.error());
    return;
  }
  client_name_ = hello->client_name;
  if (hello->magic != kHelloMagic) {
    refuse(CALRT_INVALID_ARGUMENT,
           "hello: field 'magic': " + hex(hello->magic) + " is not " + hex(kHelloMagic));
    return;
  }
  if (hello->protocol_major != kProtocolMajor) {
    refuse(kAbiMismatchCode,
           "hello: field 'protocol_major': " + std::to_string(hello->protocol_major) +
               ", the daemon speaks protocol " + std::to_string(kProtocolMajor) + "." +
               std::to_string(kProtocolMinor));
    return;
  }
  if (hello->abi_major != CALRT_ABI_MAJOR) {
    refuse(kAbiMismatchCode, "hello: field 'abi_major': " + std::to_string(hello->abi_major) +
                                 ", the daemon's runtime implements ABI " +
                                 std::to_string(CALRT_ABI_MAJOR) + "." +
                                 std::to_string(CALRT_ABI_MINOR));
    return;
  }
  if (needs_token_) {
    if (!shared_.token || !token_matches(*shared_.token, hello->token)) {
      spdlog::warn("session {} ({}): hello with a wrong or missing token (pid {}, '{}')",
                   session_id_, peer_, hello->client_pid, client_name_);
      refuse(CALRT_PERMISSION_DENIED,
             hello->token.empty()
                 ? "hello: this daemon's TCP port needs its token (set CALRT_TOKEN_FILE to the "
                   "daemon's --token-file)"
                 : "hello: field 'token': not the daemon's token");
      return;
    }
    control_ = true;  // the token is the daemon user's own secret
  }
  if (shared_.admitted >= shared_.max_clients) {
    refuse(CALRT_BUSY, "the daemon serves its limit of " + std::to_string(shared_.max_clients) +
                           (shared_.max_clients == 1 ? " client" : " clients") +
                           " (--max-clients)");
    return;
  }
  admitted_ = true;
  ++shared_.admitted;
  ++shared_.sessions_served;
  shared_.peak_sessions = std::max(shared_.peak_sessions, shared_.admitted);
  phase_ = Phase::welcomed;
  arm_idle_timer(shared_.idle_timeout);
  splitter_.set_payload_limit(SIZE_MAX);  // the protocol's own frame limit from here on
  Welcome welcome;
  welcome.abi_major = shared_.api->abi_major;
  welcome.abi_minor = shared_.api->abi_minor;
  welcome.abi_patch = shared_.api->abi_patch;
  welcome.session_id = session_id_;
  welcome.keepalive_ms = shared_.keepalive_ms;
  welcome.max_clients = shared_.max_clients;
  welcome.control = control_ ? 1 : 0;
  welcome.server_version =
      "simdev serve " + std::to_string(kProtocolMajor) + "." + std::to_string(kProtocolMinor);
  spdlog::info("session {}: welcome '{}' pid {} ({})", session_id_, client_name_, hello->client_pid,
               peer_);
  send(encode_frame(MessageType::welcome, 0, encode_payload(welcome)));
}

void Session::on_request(Frame& frame) {
  auto decoded = decode_request_payload(frame.payload);
  if (!decoded) {
    violation(decoded.error());
    return;
  }
  const uint32_t id = frame.header.request_id;
  if (outstanding_.contains(id)) {
    violation("request id " + std::to_string(id) + " is still outstanding");
    return;
  }
  const Call call = call_of(*decoded);
  if (call == Call::device_create) {
    if (attach_ == Attach::pending || attach_ == Attach::attached || attach_ == Attach::detached) {
      violation("a second Device_Create on this connection");
      return;
    }
    attach_ = Attach::pending;
  } else if (attach_ == Attach::none) {
    violation(std::string("the first request is ") + to_string(call) + ", not Device_Create");
    return;
  }
  outstanding_.insert(id);
  std::optional<JobWait::In> then_wait = take_trailing_wait(*decoded);
  const bool then_wait_taken = then_wait.has_value();
  auto request = std::make_shared<Request>(std::move(*decoded));
  // The work item hands its reference on to the io thread, so that the session is never
  // destroyed on a lane thread while the io thread uses it.
  auto work = [self = shared_from_this(), id, request, then_wait = std::move(then_wait)]() mutable {
    if (then_wait && !self->shared_.host.virtual_clock()) {
      deliver(std::move(self), id,
              refused_outcome(*request, CALRT_INVALID_ARGUMENT, kTrailingWaitNeedsVirtualClock));
      return;
    }
    DispatchContext context = self->dispatch_context(is_wait_call(*request));
    Outcome outcome = dispatch(context, *request);
    if (then_wait) {
      const std::optional<WireHandle> job = submitted_job(outcome);
      self->objects_.batch_job = job ? job->id : 0;
      if (job) {
        then_wait->job = *job;
        outcome = dispatch(context, Request{Tagged<JobWait>{std::move(*then_wait)}});
      }
    }
    deliver(std::move(self), id, std::move(outcome));
  };
  if (is_wait_call(*request)) {
    post_wait(std::move(work));
  } else {
    // Bounded per session: a flood is answered BUSY at once instead of growing the daemon.
    if (device_queue_.size() >= kMaxQueuedRequests ||
        device_queue_bytes_ + frame.payload.size() > kMaxQueuedBytes) {
      outstanding_.erase(id);
      send(encode_frame(MessageType::response, id,
                        refused_outcome(*request, CALRT_BUSY,
                                        "the session has " + std::to_string(device_queue_.size()) +
                                            " requests (" + std::to_string(device_queue_bytes_) +
                                            " bytes) queued for the device; the limit is " +
                                            std::to_string(kMaxQueuedRequests) + " requests, " +
                                            std::to_string(kMaxQueuedBytes) + " bytes")
                            .payload));
      return;
    }
    device_queue_bytes_ += frame.payload.size();
    const Call scheduled = scheduled_as(*request);
    device_queue_.push_back(
        DeviceWork{id, frame.payload.size(),
                   [self = shared_from_this(), call = scheduled, work = std::move(work)]() mutable {
                     self->run_on_device_lane(call, std::move(work));
                   },
                   // A trailing wait computes the batch's job, and every job queued before it.
                   is_short_call(scheduled) && !then_wait_taken});
    post_next_device_work();
  }
}

DispatchContext Session::dispatch_context(bool on_wait_lane) {
  DispatchContext context;
  context.api = shared_.api;
  context.host = &shared_.host;
  context.objects = &objects_;
  context.calbin_roots = &shared_.calbin_roots;
  context.control = control_;
  context.session_id = session_id_;
  if (on_wait_lane) {
    context.on_device_lane = [lane = &shared_.device_lane](const std::function<void()>& fn) {
      (void)lane->run_here(fn, kWaitLaneFetchBound);
    };
  } else {
    context.on_device_lane = [](const std::function<void()>& fn) { fn(); };
  }
  return context;
}

void Session::post_wait(std::function<void()> work) {
  if (!wait_lane_) wait_lane_ = std::make_unique<Lane>("wait");
  wait_lane_->post([self = shared_from_this(), work = std::move(work)]() mutable {
    {
      std::shared_lock in_runtime(self->shared_.waits_in_runtime);
      work();
    }
    // A finished wait may have been the last job in flight.
    if (self->shared_.quiet.has_waiting()) {
      self->shared_.device_lane.post([self] { poll_quiet_point(self); });
    }
  });
}

void Session::post_next_device_work() {
  if (on_device_lane_ || device_queue_.empty() || phase_ == Phase::closed) return;
  DeviceWork next = std::move(device_queue_.front());
  device_queue_.pop_front();
  device_queue_bytes_ -= next.bytes;
  on_device_lane_ = next.request_id;
  // Still "on the lane" when run here: the session's next request waits for its answer.
  if (next.short_call && shared_.host.virtual_clock()) {
    std::unique_lock no_wait_in_runtime(shared_.waits_in_runtime, std::try_to_lock);
    if (no_wait_in_runtime.owns_lock() && shared_.device_lane.run_here_if_idle(next.run)) return;
  }
  shared_.device_lane.post(std::move(next.run));
}

void Session::run_on_device_lane(Call call, QuietPointQueue::Run work) {
  QuietPointQueue& quiet = shared_.quiet;
  if (call == Call::calbin_configure) {
    const auto deadline = QuietPointQueue::Clock::now() + shared_.configure_wait;
    if (quiet.needs_quiet(std::move(work), deadline)) {
      spdlog::debug("session {}: Calbin_Configure waits for a quiet point (up to {} ms)",
                    session_id_, shared_.configure_wait.count());
      // The io thread owns timers; at the deadline the configure runs whatever the state.
      asio::post(shared_.io, [self = shared_from_this(), deadline] {
        auto timer = std::make_shared<asio::steady_timer>(self->shared_.io, deadline);
        timer->async_wait([self, timer](std::error_code) {
          self->shared_.device_lane.post([self] { poll_quiet_point(self); });
        });
      });
    }
  } else if (call == Call::job_submit) {
    quiet.makes_busy(std::move(work));
  } else {
    work();
  }
  quiet.poll(QuietPointQueue::Clock::now());
}

void Session::poll_quiet_point(const std::shared_ptr<Session>& self) {
  self->shared_.quiet.poll(QuietPointQueue::Clock::now());
}

void Session::deliver(std::shared_ptr<Session> self, uint32_t request_id, Outcome outcome) {
  asio::io_context& io = self->shared_.io;
  asio::post(io, [self = std::move(self), request_id, outcome = std::move(outcome)]() mutable {
    self->on_response(request_id, std::move(outcome));
  });
}

void Session::on_response(uint32_t request_id, Outcome outcome) {
  outstanding_.erase(request_id);
  if (on_device_lane_ == request_id) {
    on_device_lane_.reset();
    post_next_device_work();
  }
  if (outcome.call == Call::device_create) {
    attach_ = outcome.code == CALRT_OK ? Attach::attached : Attach::failed;
  } else if (outcome.call == Call::device_destroy && outcome.code == CALRT_OK) {
    attach_ = Attach::detached;
  }
  if (phase_ != Phase::welcomed) return;
  // Idle time counts from the answer too: a call that took long must not leave its client
  // already idle when the answer arrives.
  last_activity_ = std::chrono::steady_clock::now();
  send(encode_frame(MessageType::response, request_id, outcome.payload));
}

void Session::send_keepalive() {
  if (phase_ != Phase::welcomed || writes_.size() >= kKeepaliveQueueBound) return;
  send(encode_frame(MessageType::keepalive, 0, {}));
}

void Session::shutdown_notice() {
  if (phase_ == Phase::closed || phase_ == Phase::closing) return;
  goodbye(CALRT_DEVICE_LOST, "daemon shutting down");
}

void Session::violation(const std::string& message) {
  ++shared_.protocol_errors;
  spdlog::warn("session {} ('{}', {}): protocol violation: {}", session_id_, client_name_, peer_,
               message);
  goodbye(CALRT_INVALID_ARGUMENT, "protocol violation: " + message);
}

void Session::refuse(uint32_t code, const std::string& message) {
  spdlog::info("session {} ({}): refused: {}", session_id_, peer_, message);
  Notice notice{code, message};
  send(encode_frame(MessageType::refused, 0, encode_payload(notice)));
  close_after_flush();
}

void Session::goodbye(uint32_t code, const std::string& message) {
  Notice notice{code, message};
  send(encode_frame(MessageType::goodbye, 0, encode_payload(notice)));
  close_after_flush();
}

void Session::send(std::vector<uint8_t> frame) {
  if (phase_ == Phase::closed) return;
  writes_.push_back(std::move(frame));
  if (!writing_) write_next();
}

void Session::write_next() {
  writing_ = true;
  asio::async_write(socket_, asio::buffer(writes_.front()),
                    [self = shared_from_this()](std::error_code ec, size_t) {
                      if (self->phase_ == Phase::closed) return;
                      if (ec) {
                        self->close_now();
                        return;
                      }
                      self->writes_.pop_front();
                      if (!self->writes_.empty()) {
                        self->write_next();
                        return;
                      }
                      self->writing_ = false;
                      if (self->close_after_flush_) self->close_now();
                    });
}

void Session::close_after_flush() {
  if (phase_ == Phase::closed) return;
  phase_ = Phase::closing;
  close_after_flush_ = true;
  if (!writing_) {
    close_now();
    return;
  }
  close_timer_.expires_after(kCloseFlushBound);
  close_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (!ec) self->close_now();
  });
}

void Session::close_now() {
  if (phase_ == Phase::closed) return;
  phase_ = Phase::closed;
  std::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
  close_timer_.cancel();
  handshake_timer_.cancel();
  idle_timer_.cancel();
  writes_.clear();
  // Requests not yet on the device lane are dropped: nobody is left to answer.
  device_queue_.clear();
  device_queue_bytes_ = 0;
  --shared_.connections;
  if (admitted_) {
    admitted_ = false;
    --shared_.admitted;
  }
  spdlog::debug("session {}: closed", session_id_);
  start_cleanup();
  if (shared_.on_closed) shared_.on_closed(shared_from_this());
}

void Session::start_cleanup() {
  if (attach_ == Attach::none) return;
  shared_.cleanups_pending.fetch_add(1);
  // Behind every request of the session already queued, so nothing it asked for runs after.
  shared_.device_lane.post([self = shared_from_this()]() mutable {
    DispatchContext context;
    context.api = self->shared_.api;
    context.host = &self->shared_.host;
    context.objects = &self->objects_;
    const Failure detached = release_session(context);
    if (!detached.ok()) {
      spdlog::warn("session {}: detach: {}", self->session_id_, detached.message);
    }
    // Its jobs are cancelled, so a Job_Wait still running on the wait lane returns now.
    if (self->wait_lane_) {
      self->wait_lane_->stop_and_join();
      self->wait_lane_.reset();
    }
    // Its cancelled jobs may leave the device quiet for a waiting configure.
    poll_quiet_point(self);
    self->shared_.cleanups_pending.fetch_sub(1);
    asio::io_context& io = self->shared_.io;
    asio::post(io, [keep = std::move(self)] {});
  });
}

}  // namespace simdev::service::server
