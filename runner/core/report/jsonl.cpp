#include "runner/core/report/jsonl.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace runner {

JsonlStream::~JsonlStream() {
  if (file_ != nullptr) {
    std::fclose(file_);
  }
  if (saved_stdout_ >= 0) {
    std::fflush(stdout);
    ::dup2(saved_stdout_, STDOUT_FILENO);
    ::close(saved_stdout_);
  }
}

std::string JsonlStream::open(const char* flag, const std::filesystem::path& path) {
  name_ = path.string();
  const std::string where = std::string(flag) + " '" + name_ + "': ";
  if (name_.empty()) {
    return where + "an empty path";
  }
  int fd = -1;
  if (name_ == "-") {
    // The records keep the real stdout; the command's own printing moves to stderr.
    std::fflush(stdout);
    fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
    saved_stdout_ = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
    if (fd < 0 || saved_stdout_ < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      return where + std::strerror(errno);
    }
  } else {
    // O_NONBLOCK makes a FIFO without a reader fail (ENXIO) instead of blocking the run.
    fd = ::open(name_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
                0644);
    if (fd < 0) {
      return where + (errno == ENXIO ? "a FIFO with no reader" : std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
      ::close(fd);
      return where + "not a file";
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  }
  file_ = ::fdopen(fd, "w");
  if (file_ == nullptr) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return where + why;
  }
  return {};
}

void JsonlStream::write(const nlohmann::json& record) {
  if (file_ == nullptr || !error_.empty()) {
    return;
  }
  // Invalid UTF-8 from a device's message is replaced rather than thrown on.
  const std::string line =
      record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + '\n';
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    error_ = "--jsonl '" + name_ + "': " + std::strerror(errno);
  }
}

void JsonlStream::write_summary(const Envelope& envelope, const nlohmann::json& extra) {
  nlohmann::json record = {{"record", "summary"}};
  record.update(to_json(envelope));
  record.update(extra);
  write(record);
}

}  // namespace runner
