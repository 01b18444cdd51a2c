// Who may use the daemon through its Unix socket (PROTOCOL.md, "Security model"): the
// daemon's own uid, root, and the uids and groups given with --allow-uid and --allow-gid,
// checked against the kernel's credentials of each connection (SO_PEERCRED), which a client
// cannot forge. The socket file's mode admits them first: 0600 by default, 0660 with its
// group set to the first allowed group, 0666 when uids outside the daemon's are allowed
// (then the credential check alone decides).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace simdev::service::server {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// The connected Unix socket's peer, or nullopt when the kernel cannot say.
std::optional<PeerCredentials> peer_credentials(int fd);

struct PeerAccess {
  uid_t daemon_uid = 0;
  std::vector<uint32_t> uids;          // --allow-uid
  std::vector<uint32_t> gids;          // --allow-gid (the peer's primary group)
  std::vector<uint32_t> control_uids;  // --control-uid

  mode_t socket_mode() const;
  // nullopt when the peer may connect; otherwise why not, for the daemon's log.
  std::optional<std::string> refusal(const PeerCredentials& peer) const;
  // The control role (device-wide calls: a reset, the parallel mode, a fault plan): the
  // daemon's uid, root and --control-uid. Other allowed peers share the device but cannot
  // act on the other sessions' work.
  bool control(const PeerCredentials& peer) const;
};

}  // namespace simdev::service::server
