// Bounded reads and atomic writes (see file_io.hpp).
#include "calbin/file_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

namespace calbin::detail {
namespace {

std::string errno_text(int error) {
  return std::error_code(error, std::generic_category()).message();
}

// Unique within this process (counter) and across processes (pid), so concurrent writers of
// the same target never share a temporary file.
std::filesystem::path temp_path_for(const std::filesystem::path& path) {
  static std::atomic<uint64_t> counter{0};
  std::string name = "." + path.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                     std::to_string(counter.fetch_add(1));
  return path.parent_path() / name;
}

Result<void> write_all(int fd, std::span<const uint8_t> bytes, const std::string& label) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t written = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (written < 0 && errno == EINTR) {
      continue;
    }
    if (written <= 0) {
      return fail(label, "", "write failed: " + errno_text(errno));
    }
    done += static_cast<size_t>(written);
  }
  if (::fsync(fd) != 0) {
    return fail(label, "", "fsync failed: " + errno_text(errno));
  }
  return {};
}

}  // namespace

Result<std::string> read_file_bounded(const std::filesystem::path& path, uint64_t max_bytes) {
  const std::string label = path.string();
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return fail(label, "", error ? "cannot open: " + error.message() : "not a regular file");
  }
  const uint64_t size = std::filesystem::file_size(path, error);
  if (error) {
    return fail(label, "", "cannot stat: " + error.message());
  }
  if (size > max_bytes) {
    return fail(label, "",
                "file is " + std::to_string(size) + " bytes, more than the limit of " +
                    std::to_string(max_bytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(label, "", "cannot open for reading");
  }
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in.gcount()) != size || in.peek() != std::char_traits<char>::eof()) {
    return fail(label, "", "file changed size while being read");
  }
  return text;
}

Result<void> write_file_atomic(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  const std::string label = path.string();
  const std::filesystem::path temp = temp_path_for(path);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return fail(label, "",
                "cannot create temporary file " + temp.string() + ": " + errno_text(errno));
  }
  Result<void> written = write_all(fd, bytes, label);
  if (::close(fd) != 0 && written) {
    written = fail(label, "", "close failed: " + errno_text(errno));
  }
  if (written && ::rename(temp.c_str(), path.c_str()) != 0) {
    written = fail(label, "", "rename from " + temp.string() + " failed: " + errno_text(errno));
  }
  if (!written) {
    ::unlink(temp.c_str());
  }
  return written;
}

Result<void> write_file_atomic(const std::filesystem::path& path, std::string_view text) {
  return write_file_atomic(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace calbin::detail
