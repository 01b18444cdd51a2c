// Where the daemon's Unix socket lives when --socket is not given (PROTOCOL.md, "Security
// model"): a directory of the daemon's own, DIR/calrt.sock. In a directory others can write
// (the README's old /tmp example), another user can take the socket's path first or replace
// the file; in a directory only the daemon's uid can write, nobody can. The default is
// $XDG_RUNTIME_DIR/calrt, as systemd and D-Bus place per-user sockets.
#pragma once

#include <sys/types.h>

#include <string>

#include <tl/expected.hpp>

namespace simdev::service::server {

// $XDG_RUNTIME_DIR/calrt, or an error saying that it is not set.
tl::expected<std::string, std::string> default_runtime_dir();

// Creates `dir` with `mode` when it does not exist (its parent must), then checks it: a
// directory, not a symbolic link, owned by the daemon's uid, granting nobody more than
// `mode` (0700; 0711 when other uids must reach the socket inside). Returns the socket path
// inside it. Errors name the directory and the check.
tl::expected<std::string, std::string> prepare_runtime_dir(const std::string& dir, mode_t mode);

// A warning for a --socket whose directory others can write without the sticky bit (they
// could replace the socket file), or nothing.
std::string socket_dir_warning(const std::string& socket_path);

}  // namespace simdev::service::server
