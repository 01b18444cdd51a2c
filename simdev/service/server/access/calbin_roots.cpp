#include "simdev/service/server/access/calbin_roots.hpp"

#include <algorithm>
#include <system_error>

namespace simdev::service::server {
namespace {

namespace fs = std::filesystem;

// Component-wise, so that /srv/calbins-old is not inside /srv/calbins.
bool inside(const fs::path& path, const fs::path& root) {
  const auto [root_end, path_at] =
      std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return root_end == root.end();
}

bool inside_any(const fs::path& path, const std::vector<fs::path>& roots) {
  return std::any_of(roots.begin(), roots.end(),
                     [&](const fs::path& root) { return inside(path, root); });
}

}  // namespace

tl::expected<std::vector<fs::path>, std::string> canonical_roots(
    const std::vector<std::string>& roots) {
  std::vector<fs::path> out;
  for (const std::string& root : roots) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(root, ec);
    if (ec) return tl::unexpected("--calbin-root " + root + ": " + ec.message());
    if (!fs::is_directory(canonical, ec)) {
      return tl::unexpected("--calbin-root " + root + ": not a directory");
    }
    out.push_back(canonical);
  }
  return out;
}

tl::expected<fs::path, std::string> confine_to_roots(const std::string& requested,
                                                     const std::vector<fs::path>& roots) {
  const fs::path path(requested);
  // The client's working directory is not the daemon's.
  if (!path.is_absolute()) {
    return tl::unexpected("calbin path \"" + requested + "\" is not absolute");
  }
  const std::string outside =
      "calbin path \"" + requested + "\" is outside the daemon's calbin roots (--calbin-root)";
  if (!inside_any(path.lexically_normal(), roots)) return tl::unexpected(outside);
  std::error_code ec;
  const fs::path canonical = fs::canonical(path, ec);
  // Inside a root the answer may say what is there: the operator published that tree.
  if (ec) return tl::unexpected("calbin path \"" + requested + "\": " + ec.message());
  if (!inside_any(canonical, roots)) {
    return tl::unexpected(outside + " once its symbolic links are followed");
  }
  return canonical;
}

}  // namespace simdev::service::server
