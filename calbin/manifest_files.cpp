// Confining FileEntry paths to the calbin directory and checking files against the manifest.
#include <algorithm>
#include <system_error>

#include "calbin/manifest.hpp"
#include "calbin/sha256.hpp"

namespace calbin {
namespace fs = std::filesystem;
namespace {

Result<void> check_lexically_relative(const std::string& label, std::string_view relative_path) {
  if (relative_path.empty()) {
    return fail(label, "", "empty path");
  }
  if (relative_path.find('\0') != std::string_view::npos) {
    return fail(label, "", "path contains a NUL byte");
  }
  const fs::path relative(relative_path);
  if (relative.has_root_path()) {
    return fail(label, "", "absolute path; files must be relative to the calbin directory");
  }
  for (const fs::path& part : relative) {
    if (part == "..") {
      return fail(label, "", "path leaves the calbin directory through \"..\"");
    }
  }
  return {};
}

// A dangling symlink resolves lexically in weakly_canonical, which would hide where it points;
// refusing it keeps the containment test below meaningful.
Result<void> check_no_dangling_link(const std::string& label, const fs::path& dir,
                                    const fs::path& relative) {
  fs::path prefix = dir;
  for (const fs::path& part : relative) {
    prefix /= part;
    std::error_code error;
    const fs::file_status link = fs::symlink_status(prefix, error);
    if (link.type() == fs::file_type::not_found) {
      return {};
    }
    if (fs::is_symlink(link) && !fs::exists(fs::status(prefix, error))) {
      return fail(label, "", "dangling symlink " + prefix.string());
    }
  }
  return {};
}

bool is_within(const fs::path& root, const fs::path& target) {
  const auto [root_end, target_at] =
      std::mismatch(root.begin(), root.end(), target.begin(), target.end());
  (void)target_at;
  return root_end == root.end();
}

}  // namespace

Result<fs::path> resolve_inside(const fs::path& calbin_dir, std::string_view relative_path) {
  const std::string label(relative_path);
  if (Result<void> lexical = check_lexically_relative(label, relative_path); !lexical) {
    return tl::unexpected(lexical.error());
  }
  const fs::path joined = calbin_dir / fs::path(relative_path);
  if (Result<void> links = check_no_dangling_link(label, calbin_dir, relative_path); !links) {
    return tl::unexpected(links.error());
  }
  std::error_code error;
  const fs::path root = fs::weakly_canonical(calbin_dir, error);
  const fs::path target = error ? fs::path() : fs::weakly_canonical(joined, error);
  if (error) {
    return fail(label, "", "cannot resolve: " + error.message());
  }
  if (!is_within(root, target)) {
    return fail(label, "",
                "resolves to " + target.string() + ", outside the calbin directory " +
                    root.string() + " (a symlink pointing outside?)");
  }
  return joined;
}

namespace {

Result<void> verify_one(const fs::path& calbin_dir, const FileEntry& entry, size_t index) {
  const std::string field = "manifest.json files[" + std::to_string(index) + "]";
  Result<fs::path> path = resolve_inside(calbin_dir, entry.path);
  if (!path) {
    return fail(entry.path, "", path.error().message + " (" + field + ".path)");
  }
  std::error_code error;
  const fs::file_status status = fs::status(*path, error);
  if (status.type() == fs::file_type::not_found) {
    return fail(entry.path, "", "missing, but listed in " + field);
  }
  if (!fs::is_regular_file(status)) {
    return fail(entry.path, "", "not a regular file, but listed in " + field);
  }
  const uint64_t size = fs::file_size(*path, error);
  if (error) {
    return fail(entry.path, "", "cannot stat: " + error.message());
  }
  if (size != entry.size) {
    return fail(entry.path, "",
                "size " + std::to_string(size) + " but " + field + ".size says " +
                    std::to_string(entry.size));
  }
  Result<std::string> digest = sha256_file(*path);
  if (!digest) {
    return fail(entry.path, "", digest.error().message);
  }
  if (*digest != entry.sha256) {
    return fail(entry.path, "",
                "sha256 " + *digest + " but " + field + ".sha256 says " + entry.sha256);
  }
  return {};
}

}  // namespace

Result<void> verify_files(const fs::path& calbin_dir, const Manifest& manifest) {
  for (size_t i = 0; i < manifest.files.size(); ++i) {
    if (Result<void> checked = verify_one(calbin_dir, manifest.files[i], i); !checked) {
      return checked;
    }
  }
  return {};
}

}  // namespace calbin
