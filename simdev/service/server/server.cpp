#include "simdev/service/server/server.hpp"

#include <pthread.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <set>
#include <system_error>

#include <spdlog/spdlog.h>
#include <tl/expected.hpp>

#include "simdev/runtime/sim_api.h"
#include "simdev/service/server/access/calbin_roots.hpp"
#include "simdev/service/server/access/peer_access.hpp"
#include "simdev/service/server/access/refusal_log.hpp"
#include "simdev/service/server/access/runtime_dir.hpp"
#include "simdev/service/server/access/tcp_token.hpp"
#include "simdev/service/server/asio.hpp"
#include "simdev/service/server/calls/device_host.hpp"
#include "simdev/service/server/session/lane.hpp"
#include "simdev/service/server/session/session.hpp"

namespace simdev::service::server {
namespace {

// The text of an error from a socket call. Asio reports them with errno values; strerror
// avoids error_category::message(), whose virtual call into libstdc++'s category object
// UBSan's vptr check cannot verify.
std::string errno_text(const std::error_code& ec) { return std::strerror(ec.value()); }

// An accept cancelled by the acceptor's close. By value: comparing error_codes calls a member
// of the category object, which UBSan's vptr check cannot verify either.
bool aborted(const std::error_code& ec) { return ec.value() == asio::error::operation_aborted; }

// Every session is told goodbye at shutdown; those that do not go within this bound are cut.
constexpr auto kShutdownBound = std::chrono::milliseconds(3000);
constexpr auto kShutdownPoll = std::chrono::milliseconds(20);

using local = asio::local::stream_protocol;
using tcp = asio::ip::tcp;

// A socket file at path: refuses anything that is not a socket or that someone listens on,
// and removes a stale one so that bind can succeed.
tl::expected<void, std::string> clear_stale_socket(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return tl::unexpected("--socket " + path + ": " + std::strerror(errno));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return tl::unexpected("--socket " + path +
                          " exists and is not a socket; refusing to replace it");
  }
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return tl::unexpected(std::string("socket(AF_UNIX): ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  ::close(fd);
  if (rc == 0) {
    return tl::unexpected("--socket " + path + ": another daemon is listening there");
  }
  if (err != ECONNREFUSED && err != ENOENT) {
    return tl::unexpected("--socket " + path +
                          ": probing the existing socket: " + std::strerror(err));
  }
  spdlog::info("removing stale socket {}", path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return tl::unexpected("--socket " + path +
                          ": removing the stale socket: " + std::strerror(errno));
  }
  return {};
}

class Server {
 public:
  // stop_signals: a signalfd for SIGINT and SIGTERM, which the caller has blocked in every
  // thread; the server owns it from here.
  // roots: the canonical --calbin-root directories.
  Server(const ServerOptions& options, const CalrtApi* api, int stop_signals,
         std::vector<std::filesystem::path> roots, std::optional<TokenDigest> token)
      : options_(options),
        host_(api, options.device_config),
        shared_{io_,
                api,
                host_,
                device_lane_,
                options.keepalive_ms,
                options.max_clients,
                options.max_connections,
                std::chrono::milliseconds(options.handshake_timeout_ms),
                0,
                0,
                0,
                0,
                0,
                {0},
                {}},
        unix_acceptor_(io_),
        tcp_acceptor_(io_),
        keepalive_timer_(io_),
        shutdown_timer_(io_),
        signals_(io_, stop_signals) {
    shared_.on_closed = [this](const std::shared_ptr<Session>& s) { sessions_.erase(s); };
    shared_.configure_wait = std::chrono::milliseconds(options.configure_wait_ms);
    shared_.idle_timeout = std::chrono::milliseconds(options.idle_timeout_ms);
    shared_.calbin_roots = std::move(roots);
    shared_.token = token;
  }

  ~Server() {
    if (socket_created_) ::unlink(options_.socket_path.c_str());
  }

  tl::expected<void, std::string> listen() {
    const std::string& path = options_.socket_path;
    if (path.empty()) return tl::unexpected(std::string("--socket: empty path"));
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return tl::unexpected("--socket " + path + ": path of " + std::to_string(path.size()) +
                            " bytes exceeds the Unix socket limit of " +
                            std::to_string(sizeof(sockaddr_un{}.sun_path) - 1));
    }
    if (auto cleared = clear_stale_socket(path); !cleared) return cleared;
    std::error_code ec;
    unix_acceptor_.open(local(), ec);
    if (!ec) {
      // Owner-only from the moment the file exists: the umask covers bind; the group and the
      // wider modes that --allow-gid and --allow-uid ask for come after.
      const mode_t old_mask = ::umask(0177);
      unix_acceptor_.bind(local::endpoint(path), ec);
      ::umask(old_mask);
      if (!ec) socket_created_ = true;
    }
    if (!ec && !access_.gids.empty() &&
        ::chown(path.c_str(), static_cast<uid_t>(-1), access_.gids.front()) != 0) {
      ec = std::error_code(errno, std::generic_category());
      return tl::unexpected("--socket " + path + ": cannot give it group " +
                            std::to_string(access_.gids.front()) +
                            " (--allow-gid): " + errno_text(ec));
    }
    if (!ec && ::chmod(path.c_str(), access_.socket_mode()) != 0) {
      ec = std::error_code(errno, std::generic_category());
    }
    if (!ec) unix_acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return tl::unexpected("--socket " + path + ": " + errno_text(ec));

    if (options_.tcp_port) {
      const tcp::endpoint endpoint(asio::ip::make_address_v4("127.0.0.1"), *options_.tcp_port);
      tcp_acceptor_.open(endpoint.protocol(), ec);
      if (!ec) tcp_acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
      if (!ec) tcp_acceptor_.bind(endpoint, ec);
      if (!ec) tcp_acceptor_.listen(asio::socket_base::max_listen_connections, ec);
      if (ec) {
        return tl::unexpected("--tcp " + std::to_string(*options_.tcp_port) + ": " +
                              errno_text(ec));
      }
      tcp_port_ = tcp_acceptor_.local_endpoint().port();
    }
    return {};
  }

  void print_ready() const {
    // One write, so that a reader never sees the Unix line without the TCP one.
    std::string lines = "simdev serve: listening on unix:" + options_.socket_path + "\n";
    if (options_.tcp_port) {
      lines += "simdev serve: listening on tcp:127.0.0.1:" + std::to_string(tcp_port_) + "\n";
    }
    std::fwrite(lines.data(), 1, lines.size(), stdout);
    std::fflush(stdout);
  }

  void run() {
    accept_unix();
    if (options_.tcp_port) accept_tcp();
    schedule_keepalive();
    signals_.async_wait(asio::posix::stream_descriptor::wait_read, [this](std::error_code ec) {
      if (ec) return;
      signalfd_siginfo info{};
      const ssize_t n = ::read(signals_.native_handle(), &info, sizeof info);
      spdlog::info("signal {}: shutting down",
                   n == sizeof info ? static_cast<int>(info.ssi_signo) : 0);
      begin_shutdown();
    });
    // A handler that throws (out of memory on one client's frame) costs that handler, not
    // the daemon: run resumes where it stopped.
    while (true) {
      try {
        io_.run();
        break;
      } catch (const std::exception& e) {
        spdlog::error("io handler threw: {}", e.what());
      }
    }
    // A forced end (the shutdown bound passed): cut what is left, let the device lane run
    // the cleanups, then release the device.
    for (const auto& s : std::set<std::shared_ptr<Session>>(sessions_)) s->close_now();
    sessions_.clear();
    device_lane_.post([this] {
      shared_.quiet.flush();
      host_.destroy_now();
    });
    device_lane_.stop_and_join();
  }

  const ServerShared& stats() const { return shared_; }

 private:
  void accept_unix() {
    auto socket = std::make_shared<Session::Socket>(io_);
    unix_acceptor_.async_accept(*socket, [this, socket](std::error_code ec) {
      if (aborted(ec) || shutting_down_) return;
      if (!ec) {
        accept_backoff_ = {};
        const auto peer = peer_credentials(socket->native_handle());
        const auto refusal =
            peer ? access_.refusal(*peer) : std::optional<std::string>("no peer credentials");
        if (refusal) {
          // Closed before a byte is read: an unknown local user learns only that it may not.
          const std::string who = peer ? "uid " + std::to_string(peer->uid) : "an unknown peer";
          if (auto line = refusals_.note(who, *refusal, RefusalLog::Clock::now())) {
            spdlog::warn("unix connection refused: {}", *line);
          }
          std::error_code ignored;
          socket->close(ignored);
        } else {
          admit(std::move(*socket), Admission{"unix", false, access_.control(*peer)});
        }
        accept_unix();
        return;
      }
      after_accept_error("unix", ec, [this] { accept_unix(); });
    });
  }

  void accept_tcp() {
    auto socket = std::make_shared<Session::Socket>(io_);
    tcp_acceptor_.async_accept(*socket, [this, socket](std::error_code ec) {
      if (aborted(ec) || shutting_down_) return;
      if (!ec) {
        accept_backoff_ = {};
        admit(std::move(*socket), Admission{"tcp", true, false});
        accept_tcp();
        return;
      }
      after_accept_error("tcp", ec, [this] { accept_tcp(); });
    });
  }

  // An accept that fails (EMFILE, ENFILE, ENOBUFS) fails again at once while the cause
  // lasts: retrying at once spins the io thread. Log and retry after a growing pause
  // (10 ms doubling to 1 s); a successful accept resets it.
  template <class Retry>
  void after_accept_error(const char* transport, std::error_code ec, Retry retry) {
    using std::chrono::milliseconds;
    accept_backoff_ = accept_backoff_ == milliseconds{0}
                          ? milliseconds{10}
                          : std::min(accept_backoff_ * 2, milliseconds{1000});
    spdlog::warn("{} accept failed: {}; retrying in {} ms", transport, errno_text(ec),
                 accept_backoff_.count());
    auto timer = std::make_shared<asio::steady_timer>(io_, accept_backoff_);
    timer->async_wait([this, timer, retry](std::error_code wait_ec) {
      if (wait_ec || shutting_down_) return;
      retry();
    });
  }

  void admit(Session::Socket socket, Admission admission) {
    if (shared_.connections >= shared_.max_connections) {
      // Closed before a byte is read: nothing of the connection is buffered.
      if (auto line = refusals_.note(
              admission.peer + " over the limit",
              std::to_string(shared_.connections) + " connections open (--max-connections)",
              RefusalLog::Clock::now())) {
        spdlog::warn("{} connection refused: {}", admission.peer, *line);
      }
      std::error_code ignored;
      socket.close(ignored);
      return;
    }
    auto session = std::make_shared<Session>(shared_, std::move(socket), std::move(admission));
    sessions_.insert(session);
    session->start();
  }

  void schedule_keepalive() {
    keepalive_timer_.expires_after(std::chrono::milliseconds(options_.keepalive_ms));
    keepalive_timer_.async_wait([this](std::error_code ec) {
      if (ec || shutting_down_) return;
      for (const auto& s : sessions_) s->send_keepalive();
      schedule_keepalive();
    });
  }

  void begin_shutdown() {
    if (shutting_down_) return;
    shutting_down_ = true;
    std::error_code ignored;
    unix_acceptor_.close(ignored);
    tcp_acceptor_.close(ignored);
    keepalive_timer_.cancel();
    for (const auto& s : std::set<std::shared_ptr<Session>>(sessions_)) s->shutdown_notice();
    shutdown_deadline_ = std::chrono::steady_clock::now() + kShutdownBound;
    poll_shutdown();
  }

  void poll_shutdown() {
    if ((sessions_.empty() && shared_.cleanups_pending.load() == 0) ||
        std::chrono::steady_clock::now() >= shutdown_deadline_) {
      signals_.cancel();
      io_.stop();
      return;
    }
    shutdown_timer_.expires_after(kShutdownPoll);
    shutdown_timer_.async_wait([this](std::error_code ec) {
      if (!ec) poll_shutdown();
    });
  }

  ServerOptions options_;
  PeerAccess access_{::geteuid(), options_.allow_uids, options_.allow_gids, options_.control_uids};
  asio::io_context io_;
  DeviceHost host_;
  Lane device_lane_{"device"};
  ServerShared shared_;
  local::acceptor unix_acceptor_;
  tcp::acceptor tcp_acceptor_;
  asio::steady_timer keepalive_timer_;
  asio::steady_timer shutdown_timer_;
  // Signals are read from a descriptor, not caught by a handler: a handler runs at an arbitrary
  // point of whichever thread the kernel picks, and ThreadSanitizer defers it until that
  // thread next enters the runtime, which let a SIGTERM go unanswered.
  asio::posix::stream_descriptor signals_;
  std::set<std::shared_ptr<Session>> sessions_;
  bool socket_created_ = false;
  uint16_t tcp_port_ = 0;
  bool shutting_down_ = false;
  std::chrono::milliseconds accept_backoff_{0};
  RefusalLog refusals_;  // the refused peers' warnings, rate-limited per peer
  std::chrono::steady_clock::time_point shutdown_deadline_{};
};

}  // namespace

int run_server(const ServerOptions& given) {
  ServerOptions options = given;
  if (options.socket_path.empty()) {
    auto dir = options.runtime_dir.empty()
                   ? default_runtime_dir()
                   : tl::expected<std::string, std::string>(options.runtime_dir);
    // Other uids reach the socket only through the directory: search, not list.
    const bool others =
        !options.allow_uids.empty() || !options.allow_gids.empty() || !options.control_uids.empty();
    auto socket = dir ? prepare_runtime_dir(*dir, others ? 0711 : 0700) : dir;
    if (!socket) {
      spdlog::error("simdev serve: {}", socket.error());
      return 1;
    }
    options.socket_path = *socket;
  } else if (const std::string warning = socket_dir_warning(options.socket_path);
             !warning.empty()) {
    spdlog::warn("{}", warning);
  }
  if (options.max_clients < 1 || options.max_clients > 64) {
    spdlog::error("--max-clients {}: must be in 1..64", options.max_clients);
    return 1;
  }
  if (options.keepalive_ms == 0) {
    spdlog::error("--keepalive-ms 0: must be at least 1");
    return 1;
  }
  auto roots = canonical_roots(options.calbin_roots);
  if (!roots) {
    spdlog::error("simdev serve: {}", roots.error());
    return 1;
  }
  if (roots->empty()) {
    spdlog::warn("no --calbin-root: clients may open any calbin this user can read");
  }
  std::optional<TokenDigest> token;
  if (!options.token_file.empty()) {
    auto read = read_token_file(options.token_file);
    if (!read) {
      spdlog::error("simdev serve: {}", read.error());
      return 1;
    }
    token = *read;
  }
  if (options.tcp_port && !token) {
    spdlog::error("simdev serve: --tcp needs --token-file");
    return 1;
  }
  const CalrtApi* api = calrt_sim_get_api(CALRT_ABI_MAJOR);
  if (api == nullptr) {
    spdlog::error("the simulator's runtime does not implement ABI major {}", CALRT_ABI_MAJOR);
    return 1;
  }
  // A client that vanishes mid-write must cost an error code, not the process.
  std::signal(SIGPIPE, SIG_IGN);
  // Blocked before the server starts its device lane, so that every thread inherits the mask
  // and SIGINT/SIGTERM stay pending for the signalfd alone.
  sigset_t stop_set;
  sigemptyset(&stop_set);
  sigaddset(&stop_set, SIGINT);
  sigaddset(&stop_set, SIGTERM);
  if (const int rc = ::pthread_sigmask(SIG_BLOCK, &stop_set, nullptr); rc != 0) {
    spdlog::error("simdev serve: blocking SIGINT/SIGTERM: {}", std::strerror(rc));
    return 1;
  }
  const int stop_signals = ::signalfd(-1, &stop_set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (stop_signals < 0) {
    spdlog::error("simdev serve: signalfd: {}", std::strerror(errno));
    return 1;
  }
  uint64_t served = 0;
  size_t peak = 0;
  uint64_t errors = 0;
  {
    Server server(options, api, stop_signals, std::move(*roots), token);
    if (auto listening = server.listen(); !listening) {
      spdlog::error("simdev serve: {}", listening.error());
      return 1;
    }
    server.print_ready();
    server.run();
    served = server.stats().sessions_served;
    peak = server.stats().peak_sessions;
    errors = server.stats().protocol_errors;
  }
  std::printf(
      "simdev serve: stopped: %llu sessions served, peak %zu concurrent, %llu protocol "
      "errors\n",
      static_cast<unsigned long long>(served), peak, static_cast<unsigned long long>(errors));
  std::fflush(stdout);
  return 0;
}

}  // namespace simdev::service::server
