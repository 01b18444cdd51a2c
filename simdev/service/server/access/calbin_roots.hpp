// calbin_roots.hpp: the directories under which the daemon opens calbins for its clients
// (`--calbin-root`). A client names a path; the daemon opens it with its own rights, so without
// roots any local client could make it read, or probe the existence of, any file the daemon's
// user can see.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tl/expected.hpp>

namespace simdev::service::server {

// Canonical forms of the roots given on the command line; each must be an existing directory.
tl::expected<std::vector<std::filesystem::path>, std::string> canonical_roots(
    const std::vector<std::string>& roots);

// The canonical path of `requested` when it lies inside one of `roots` (canonical) after
// every symbolic link is followed. A path outside the roots is refused with the same words
// whether it exists or not, so the answer reveals nothing of the rest of the file system.
tl::expected<std::filesystem::path, std::string> confine_to_roots(
    const std::string& requested, const std::vector<std::filesystem::path>& roots);

}  // namespace simdev::service::server
