// Checks on the files a calbin lists. Each file fails at most one of them: a file outside
// the directory is not looked for, a missing file is not sized, a wrong-sized file is not
// hashed. That way a broken calbin fails exactly the check that names its defect.
#include <system_error>

#include "calbin/acceptance/check_context.hpp"
#include "calbin/sha256.hpp"

namespace calbin::acceptance {
namespace {

std::string where(size_t index, const FileEntry& file) {
  return "files[" + std::to_string(index) + "] \"" + file.path + "\"";
}

std::optional<std::filesystem::path> confined(const CheckContext& c, const FileEntry& file) {
  auto path = resolve_inside(c.dir, file.path);
  return path ? std::optional(*path) : std::nullopt;
}

std::optional<std::filesystem::path> present(const CheckContext& c, const FileEntry& file) {
  auto path = confined(c, file);
  std::error_code ec;
  if (!path || !std::filesystem::is_regular_file(*path, ec)) {
    return std::nullopt;
  }
  return path;
}

std::optional<std::filesystem::path> sized(const CheckContext& c, const FileEntry& file) {
  auto path = present(c, file);
  std::error_code ec;
  if (!path || std::filesystem::file_size(*path, ec) != file.size || ec) {
    return std::nullopt;
  }
  return path;
}

}  // namespace

void check_files_confined(const CheckContext& c, CheckResult& result) {
  for (size_t i = 0; i < c.manifest.files.size(); ++i) {
    const FileEntry& file = c.manifest.files[i];
    if (auto path = resolve_inside(c.dir, file.path); !path) {
      fail_check(result, c.manifest_file + ": " + where(i, file) + ": " + path.error().message);
    }
  }
}

void check_files_present(const CheckContext& c, CheckResult& result) {
  for (size_t i = 0; i < c.manifest.files.size(); ++i) {
    const FileEntry& file = c.manifest.files[i];
    if (confined(c, file) && !present(c, file)) {
      fail_check(result, c.manifest_file + ": " + where(i, file) +
                             " is listed but missing (or not a regular file)");
    }
  }
}

void check_files_size(const CheckContext& c, CheckResult& result) {
  for (size_t i = 0; i < c.manifest.files.size(); ++i) {
    const FileEntry& file = c.manifest.files[i];
    auto path = present(c, file);
    if (!path || sized(c, file)) {
      continue;
    }
    std::error_code ec;
    const auto actual = std::filesystem::file_size(*path, ec);
    fail_check(result, file.path + ": size " + std::to_string(actual) + " but " + c.manifest_file +
                           " " + where(i, file) + ".size says " + std::to_string(file.size));
  }
}

void check_files_sha256(const CheckContext& c, CheckResult& result) {
  for (size_t i = 0; i < c.manifest.files.size(); ++i) {
    const FileEntry& file = c.manifest.files[i];
    auto path = sized(c, file);
    if (!path) {
      continue;
    }
    auto digest = sha256_file(*path);
    if (!digest) {
      fail_check(result, digest.error().to_string());
    } else if (*digest != file.sha256) {
      fail_check(result, file.path + ": sha256 " + *digest + " but " + c.manifest_file + " " +
                             where(i, file) + ".sha256 says " + file.sha256);
    }
  }
}

}  // namespace calbin::acceptance
