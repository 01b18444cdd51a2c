// A directory of the conformance suite's own: made by mkdtemp (mode 0700, a name no other
// local user can guess or take first) and removed with everything in it with this object.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace runner {

class ScratchDir {
 public:
  // PARENT/PREFIX-XXXXXX; throws std::runtime_error naming the pattern when it cannot.
  ScratchDir(const std::filesystem::path& parent, const std::string& prefix) {
    std::string pattern = (parent / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("could not create a directory like " + pattern + ": " +
                               std::strerror(errno));
    }
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace runner
