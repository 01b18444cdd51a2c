// `simdev serve`: the simulated device as a daemon (simdev/service/PROTOCOL.md). stdout
// carries the listening lines and the summary that scripts read; logs go to stderr.
#include <malloc.h>
#include <unistd.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdint>
#include <string>

#include "simdev/service/server/server.hpp"
#include "simdev/tool/command.hpp"

namespace simdev::tool {
namespace {

using service::server::ServerOptions;

int run_serve(const ServerOptions& options, const std::string& log_level) {
  auto logger = spdlog::stderr_color_mt("simdev-serve");
  logger->set_level(spdlog::level::from_str(log_level));
  spdlog::set_default_logger(logger);
  // A decode step's answer carries its output row (303872 B for the reference model), made on
  // the device lane and freed on the io thread. glibc serves the first such block by mmap,
  // then raises its thresholds and trims the lane's heap as the blocks are freed, a page
  // fault storm per step (benchmarks/README.md, "The batch's wait on the device lane").
  // Fixed thresholds keep them in the heaps; the daemon keeps at most 32 MiB per heap
  // unreturned.
  mallopt(M_MMAP_THRESHOLD, 8 << 20);
  mallopt(M_TRIM_THRESHOLD, 32 << 20);
  return service::server::run_server(options);
}

class ServeCommand : public Command {
 public:
  explicit ServeCommand(CLI::App& simdev)
      : Command(simdev.add_subcommand("serve", "serve the simulated device over a socket")) {
    ServerOptions& o = options_;
    CLI::App& serve = *app_;
    CLI::Option* socket_option =
        serve.add_option("--socket", o.socket_path,
                         "Unix socket path (created 0600); default RUNTIME_DIR/calrt.sock");
    serve
        .add_option("--runtime-dir", o.runtime_dir,
                    "the daemon's own directory for its socket, created 0700 (0711 with "
                    "--allow-*); default $XDG_RUNTIME_DIR/calrt")
        ->excludes(socket_option);
    serve
        .add_option("--allow-uid", o.allow_uids,
                    "another uid that may connect through the socket (repeatable; the socket "
                    "becomes 0666 and the kernel's peer credentials decide)")
        ->check(CLI::Range(0u, 4294967294u));
    serve
        .add_option("--allow-gid", o.allow_gids,
                    "a group whose members (by primary group) may connect (repeatable; the "
                    "socket becomes 0660 with the first one as its group)")
        ->check(CLI::Range(0u, 4294967294u));
    serve
        .add_option("--control-uid", o.control_uids,
                    "a uid that may connect and make device-wide calls (reset, parallel mode, "
                    "fault plan) like the daemon's own uid and root (repeatable)")
        ->check(CLI::Range(0u, 4294967294u));
    tcp_option_ =
        serve
            .add_option("--tcp", tcp_port_,
                        "also listen on 127.0.0.1:PORT (0: any free port); needs --token-file")
            ->check(CLI::Range(0, 65535));
    serve
        .add_option("--token-file", o.token_file,
                    "the secret TCP clients must send (their CALRT_TOKEN_FILE): a 0600 file of "
                    "this uid, at least 16 characters on its first line")
        ->needs(tcp_option_);
    serve.add_flag("--allow-root", o.allow_root,
                   "run even as root (root reads every file a client names under the roots)");
    serve.add_option("--device-config", o.device_config,
                     "Device_Create config under every client's keys");
    serve.add_option("--max-clients", o.max_clients, "concurrent clients")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    serve
        .add_option("--calbin-root", o.calbin_roots,
                    "a directory clients may load calbins from (repeatable; none: any path)")
        ->check(CLI::ExistingDirectory);
    serve
        .add_option("--max-connections", o.max_connections,
                    "open connections, those that have not said hello included")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    serve
        .add_option("--handshake-timeout-ms", o.handshake_timeout_ms,
                    "close a connection without hello and Device_Create after this long")
        ->check(CLI::Range(1, 600000))
        ->capture_default_str();
    serve
        .add_option("--idle-timeout-ms", o.idle_timeout_ms,
                    "close an attached session that sends nothing and awaits no answer for "
                    "this long (0: never)")
        ->check(CLI::Range(0u, 86400000u))
        ->capture_default_str();
    serve.add_option("--keepalive-ms", o.keepalive_ms, "keepalive period")
        ->check(CLI::Range(1, 600000))
        ->capture_default_str();
    serve
        .add_option("--configure-wait-ms", o.configure_wait_ms,
                    "how long a Calbin_Configure waits for no job in flight")
        ->check(CLI::Range(0, 600000))
        ->capture_default_str();
    serve.add_option("--log-level", log_level_, "trace, debug, info, warn, error, off")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
        ->capture_default_str();
  }

  int run(int /*argc*/, char** /*argv*/) override {
    if (options_.max_connections < options_.max_clients) {
      spdlog::error(
          "serve: --max-connections {} is below --max-clients {}: the clients could "
          "never all connect",
          options_.max_connections, options_.max_clients);
      return kExitUsage;
    }
    if (tcp_option_->count() > 0) {
      if (options_.token_file.empty()) {
        spdlog::error(
            "serve: --tcp {} needs --token-file: any local user can connect to a loopback "
            "port, and the token is what tells the daemon's clients from them",
            tcp_port_);
        return kExitUsage;
      }
      options_.tcp_port = static_cast<uint16_t>(tcp_port_);
    }
    if (::geteuid() == 0 && !options_.allow_root) {
      spdlog::error(
          "serve: running as root; run the daemon as an unprivileged user, or pass "
          "--allow-root to accept that clients' calbin paths are opened with root's rights");
      return kExitUsage;
    }
    return run_serve(options_, log_level_);
  }

 private:
  ServerOptions options_;
  uint32_t tcp_port_ = 0;
  CLI::Option* tcp_option_ = nullptr;
  std::string log_level_ = "info";
};

}  // namespace

std::unique_ptr<Command> add_serve_command(CLI::App& simdev) {
  return std::make_unique<ServeCommand>(simdev);
}

}  // namespace simdev::tool
