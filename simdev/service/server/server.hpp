// server.hpp: `simdev serve`, the daemon (PROTOCOL.md). One io_context thread runs the
// listeners (the owner-only Unix socket and an optional loopback TCP port), the sessions'
// reads and writes, the keepalive timer and the signal handling; the device lane thread runs
// device calls in arrival order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace simdev::service::server {

struct ServerOptions {
  std::string socket_path;           // empty: runtime_dir/calrt.sock
  std::string runtime_dir;           // empty: $XDG_RUNTIME_DIR/calrt (runtime_dir.hpp)
  std::optional<uint16_t> tcp_port;  // 0: any free port
  std::string device_config;
  uint32_t max_clients = 16;
  // Open connections of every kind, those that have not said hello included: a client that
  // connects and says nothing holds a descriptor and a read buffer.
  uint32_t max_connections = 64;
  // A connection that has not said hello and sent Device_Create within this is closed, so
  // that silent connections cannot hold the daemon's client slots.
  uint32_t handshake_timeout_ms = 5000;
  // An attached session that sends nothing and awaits no answer for this long is closed; 0:
  // never (an LLM service may hold its device idle between requests).
  uint32_t idle_timeout_ms = 0;
  uint32_t keepalive_ms = 250;
  // Directories Calbin_Create may open calbins under (calbin_roots.hpp); none: any path the
  // daemon's user can read.
  std::vector<std::string> calbin_roots;
  // How long a Calbin_Configure waits for a moment with no job in flight (quiet_point.hpp).
  uint32_t configure_wait_ms = 10000;
  // Who besides the daemon's uid and root may connect through the Unix socket
  // (peer_access.hpp).
  std::vector<uint32_t> allow_uids;
  std::vector<uint32_t> allow_gids;
  // Who holds the control role (device-wide calls) besides the daemon's uid and root; TCP
  // clients hold it by their token (peer_access.hpp).
  std::vector<uint32_t> control_uids;
  // The secret TCP clients present in hello (tcp_token.hpp); --tcp needs it.
  std::string token_file;
  // Root reads every file and may act on every device: running as root must be asked for.
  bool allow_root = false;
};

// Runs the daemon until SIGTERM or SIGINT. Prints the listening lines to stdout when ready
// and a summary at exit. Returns the process exit code (0 after a clean shutdown, 1 when it
// could not start: the reason is logged).
int run_server(const ServerOptions& options);

}  // namespace simdev::service::server
