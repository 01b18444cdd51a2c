#include "simdev/service/server/access/runtime_dir.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "simdev/service/server/access/file_mode.hpp"

namespace simdev::service::server {
tl::expected<std::string, std::string> default_runtime_dir() {
  const char* base = std::getenv("XDG_RUNTIME_DIR");
  if (base == nullptr || *base == '\0') {
    return tl::unexpected(std::string(
        "no --socket or --runtime-dir, and XDG_RUNTIME_DIR is not set: give one of them"));
  }
  return (std::filesystem::path(base) / "calrt").string();
}

tl::expected<std::string, std::string> prepare_runtime_dir(const std::string& dir, mode_t mode) {
  const std::string where = "--runtime-dir " + dir + ": ";
  if (dir.empty()) return tl::unexpected(std::string("--runtime-dir: empty path"));
  if (::mkdir(dir.c_str(), mode) != 0 && errno != EEXIST) {
    return tl::unexpected(where + "cannot create it: " + std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    return tl::unexpected(where + std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) {
    return tl::unexpected(where + "a symbolic link; the daemon's directory must be its own");
  }
  if (!S_ISDIR(st.st_mode)) {
    return tl::unexpected(where + "not a directory");
  }
  if (st.st_uid != ::geteuid()) {
    return tl::unexpected(where + "owned by uid " + std::to_string(st.st_uid) +
                          ", not by the daemon's uid " + std::to_string(::geteuid()));
  }
  // mkdir applies the umask: a directory made just now may hold less than `mode`, never more.
  // Other uids need the search bit that --allow-* asks for, so it is set here.
  if ((st.st_mode & 0777 & ~mode) != 0) {
    return tl::unexpected(where + "mode " + mode_text(st.st_mode) +
                          " lets other users list or change it; the daemon needs " +
                          mode_text(mode) + " (chmod " + mode_text(mode) + " " + dir + ")");
  }
  if ((st.st_mode & 0777) != mode && ::chmod(dir.c_str(), mode) != 0) {
    return tl::unexpected(where + "chmod " + mode_text(mode) + ": " + std::strerror(errno));
  }
  return (std::filesystem::path(dir) / "calrt.sock").string();
}

std::string socket_dir_warning(const std::string& socket_path) {
  const std::filesystem::path parent = std::filesystem::path(socket_path).parent_path();
  struct stat st {};
  if (::stat(parent.empty() ? "." : parent.c_str(), &st) != 0) return {};
  if ((st.st_mode & 022) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return "--socket " + socket_path + ": its directory (mode " + mode_text(st.st_mode) +
           ") is writable by other users, who could replace the socket; prefer --runtime-dir";
  }
  return {};
}

}  // namespace simdev::service::server
