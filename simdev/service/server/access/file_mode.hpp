// A file's permission bits as chmod takes them ("0600"), for the daemon's messages about the
// files it insists on owning (the token file, the runtime directory).
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <string>

namespace simdev::service::server {

inline std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

}  // namespace simdev::service::server
