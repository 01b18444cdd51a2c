// golden.index: the golden set a smoke compares against is part of the calbin, so check
// accepts it only when it is there, stays inside the calbin, is listed (and so hashed) among
// its files, reads, and agrees with the manifest. Before this check an absent index, one
// escaping the calbin with "../" and a directory all passed, and a smoke found out later.
#include <system_error>

#include "calbin/acceptance/check_context.hpp"
#include "calbin/golden.hpp"

namespace calbin::acceptance {

void check_golden_index(const CheckContext& c, CheckResult& result) {
  if (!c.manifest.golden) {
    skip_check(result, c.manifest_file + " names no golden set (golden.index)");
    return;
  }
  const std::string& index = c.manifest.golden->index;
  const std::string field = c.manifest_file + ": golden.index \"" + index + "\"";
  auto path = resolve_inside(c.dir, index);
  if (!path) {
    fail_check(result, field + ": " + path.error().message);
    return;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(*path, ec)) {
    fail_check(result, field + " is missing or not a regular file");
    return;
  }
  bool listed = false;
  for (const FileEntry& file : c.manifest.files) {
    listed = listed || file.path == index;
  }
  if (!listed) {
    fail_check(result, field + " is not listed in files, so nothing verifies its SHA-256");
  }
  // A listed file that is missing is files.present's finding; reading the set would report
  // it a second time.
  for (const FileEntry& file : c.manifest.files) {
    auto listed_path = resolve_inside(c.dir, file.path);
    if (!listed_path || !std::filesystem::is_regular_file(*listed_path, ec)) {
      skip_check(result,
                 "the golden set is not read while listed files are missing or outside "
                 "the calbin (files.confined, files.present)");
      return;
    }
  }
  auto golden = read_golden_index(*path);
  if (!golden) {
    fail_check(result, field + ": " + golden.error().to_string());
    return;
  }
  if (golden->vocab != c.manifest.llm.vocab) {
    fail_check(result, index + ": vocab " + std::to_string(golden->vocab) + " but " +
                           c.manifest_file + " llm.vocab is " +
                           std::to_string(c.manifest.llm.vocab));
  }
  for (const GoldenCase& golden_case : golden->cases) {
    const uint64_t needed = uint64_t{golden_case.prompt_len} + golden_case.decode_steps;
    if (needed > c.manifest.llm.context) {
      fail_check(result, index + ": case \"" + golden_case.name + "\" needs " +
                             std::to_string(needed) + " tokens (prompt_len + decode_steps) but " +
                             c.manifest_file + " llm.context is " +
                             std::to_string(c.manifest.llm.context));
    }
  }
  if (golden->cases.empty()) {
    fail_check(result, index + " holds no cases");
  }
}

}  // namespace calbin::acceptance
