#include "simdev/service/server/access/peer_access.hpp"

#include <sys/socket.h>

#include <algorithm>

namespace simdev::service::server {

std::optional<PeerCredentials> peer_credentials(int fd) {
  ucred cred{};
  socklen_t size = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0 || size != sizeof cred) {
    return std::nullopt;
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

mode_t PeerAccess::socket_mode() const {
  if (!uids.empty() || !control_uids.empty()) return 0666;
  return gids.empty() ? 0600 : 0660;
}

bool PeerAccess::control(const PeerCredentials& peer) const {
  return peer.uid == daemon_uid || peer.uid == 0 ||
         std::find(control_uids.begin(), control_uids.end(), peer.uid) != control_uids.end();
}

std::optional<std::string> PeerAccess::refusal(const PeerCredentials& peer) const {
  const auto listed = [](const std::vector<uint32_t>& ids, uint32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  if (control(peer) || listed(uids, peer.uid) || listed(gids, peer.gid)) {
    return std::nullopt;
  }
  return "peer pid " + std::to_string(peer.pid) + " uid " + std::to_string(peer.uid) + " gid " +
         std::to_string(peer.gid) + " is neither the daemon's uid " + std::to_string(daemon_uid) +
         ", root, nor allowed by --allow-uid, --allow-gid or --control-uid";
}

}  // namespace simdev::service::server
