#include "runner/core/report/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

namespace runner {
namespace {

namespace fs = std::filesystem;

std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

// Writes all of `text` to `fd`; errno's text on failure.
std::string write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::strerror(errno);
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

std::string write_in_place(const fs::path& path, const std::string& text) {
  // O_NONBLOCK: opening a FIFO nobody reads fails with ENXIO instead of waiting forever.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    return "cannot open " + quoted(path) + " for writing: " + std::strerror(errno);
  }
  // Back to blocking writes, so that a slow reader gets the whole report.
  if (const int flags = ::fcntl(fd, F_GETFL); flags >= 0) {
    (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  std::string problem = write_all(fd, text);
  if (::close(fd) != 0 && problem.empty()) problem = std::strerror(errno);
  return problem.empty() ? "" : "cannot write " + quoted(path) + ": " + problem;
}

// The temporary file a report is first written to, beside `target`; -1 with errno on failure.
// Exclusive creation with mode 0666 lets the umask decide the report's mode, as for any file
// the user creates; the name is unique per process and attempt.
int create_temporary(const fs::path& target, fs::path& temporary) {
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temporary = target.parent_path() / ("." + target.filename().string() + ".tmp." +
                                        std::to_string(::getpid()) + "." + std::to_string(attempt));
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  return fd;
}

std::string write_atomically(const fs::path& user_path, const fs::path& target,
                             const std::string& text) {
  fs::path temporary;
  const int fd = create_temporary(target, temporary);
  if (fd < 0) {
    return "cannot create a temporary file next to " + quoted(user_path) + ": " +
           std::strerror(errno);
  }
  std::string problem = write_all(fd, text);
  if (::close(fd) != 0 && problem.empty()) problem = std::strerror(errno);
  if (problem.empty() && ::rename(temporary.c_str(), target.c_str()) != 0) {
    problem = std::strerror(errno);
  }
  if (!problem.empty()) {
    ::unlink(temporary.c_str());
    return "cannot write " + quoted(user_path) + ": " + problem;
  }
  return {};
}

// Whether write_text_file could write `path` now, found the way it would write it: a
// special file opened in place must be writable; a regular file (through its links) or a
// new path needs a temporary file in its directory, so one is created there and removed.
// Asked before a run, so that a long run does not end in a report it cannot write (a
// read-only directory, a full or read-only file system, permissions that root has too).
std::string probe_writable(const fs::path& path) {
  struct stat st {};
  fs::path target = path;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      return ::access(path.c_str(), W_OK) == 0
                 ? ""
                 : std::string("cannot write: ") + std::strerror(errno);
    }
    std::error_code error;
    const fs::path canonical = fs::canonical(path, error);
    if (!error) target = canonical;
  } else {
    std::error_code error;
    if (fs::is_symlink(fs::symlink_status(path, error))) return "a symlink to a missing file";
  }
  if (target.parent_path().empty()) target = fs::path(".") / target;
  fs::path temporary;
  const int fd = create_temporary(target, temporary);
  if (fd < 0) {
    return "cannot create a file in " + quoted(target.parent_path()) + ": " + std::strerror(errno);
  }
  ::close(fd);
  ::unlink(temporary.c_str());
  return {};
}

}  // namespace

std::string check_output_path(const char* flag, const fs::path& path) {
  if (path.empty()) {
    return std::string(flag) + " '': an empty path (use - for standard output)";
  }
  if (path == "-") return {};
  std::error_code error;
  if (fs::is_directory(path, error)) {
    return std::string(flag) + " " + quoted(path) + ": is a directory";
  }
  const fs::path parent = path.parent_path();
  if (!parent.empty() && !fs::is_directory(parent, error)) {
    return std::string(flag) + " " + quoted(path) + ": directory " + quoted(parent) +
           " does not exist";
  }
  if (std::string why = probe_writable(path); !why.empty()) {
    return std::string(flag) + " " + quoted(path) + ": " + why;
  }
  return {};
}

std::string check_output_path(const char* flag, const fs::path& path,
                              const fs::path& protected_dir) {
  if (std::string problem = check_output_path(flag, path); !problem.empty()) return problem;
  if (path == "-" || protected_dir.empty()) return {};
  std::error_code error_a, error_b;
  const fs::path target = fs::weakly_canonical(path, error_a);
  const fs::path dir = fs::weakly_canonical(protected_dir, error_b);
  if (error_a || error_b) return {};
  // Inside when the calbin directory is a prefix of the target, component by component.
  if (std::mismatch(dir.begin(), dir.end(), target.begin(), target.end()).first == dir.end()) {
    return std::string(flag) + " " + quoted(path) + ": inside the calbin " + quoted(protected_dir) +
           "; a report must not replace the calbin's files";
  }
  return {};
}

std::string write_text_file(const fs::path& path, const std::string& text) {
  if (path.empty()) return "an empty output path";
  if (path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
        std::fflush(stdout) != 0) {
      return std::string("cannot write to standard output: ") + std::strerror(errno);
    }
    return {};
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return quoted(path) + " is a directory";
    if (!S_ISREG(st.st_mode)) return write_in_place(path, text);
    // A regular file, maybe behind symlinks: replace the file the links lead to.
    std::error_code error;
    const fs::path target = fs::canonical(path, error);
    return write_atomically(path, error ? path : target, text);
  }
  if (errno != ENOENT) {
    return "cannot write " + quoted(path) + ": " + std::strerror(errno);
  }
  // A dangling symlink is not a new path: writing would create a file where it points.
  std::error_code error;
  if (fs::is_symlink(fs::symlink_status(path, error))) {
    return "cannot write " + quoted(path) + ": a symlink to a missing file";
  }
  return write_atomically(path, path, text);
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  if (a.empty() || b.empty()) {
    return false;
  }
  std::error_code error_a, error_b;
  const auto canonical_a = std::filesystem::weakly_canonical(a, error_a);
  const auto canonical_b = std::filesystem::weakly_canonical(b, error_b);
  return error_a || error_b ? a == b : canonical_a == canonical_b;
}

}  // namespace runner
