// Static acceptance of a calbin (stage 8 of the bring-up guide): every blocking item as a
// named check that passes or fails with messages naming the file, field and value. Nothing
// here touches a device. A calbin is accepted only when no check fails.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace calbin {

enum class CheckStatus { kPass, kFail, kSkip };
std::string_view to_string(CheckStatus status);

struct CheckResult {
  std::string id;     // stable name, e.g. "files.sha256"; tests and CI match on it
  std::string title;  // one line saying what is checked
  CheckStatus status = CheckStatus::kPass;
  std::vector<std::string> messages;  // why it failed, or why it was skipped
};

struct CheckReport {
  std::filesystem::path calbin_dir;
  std::vector<CheckResult> checks;
  std::vector<std::string> warnings;  // non-blocking oddities

  bool passed() const;
  const CheckResult* find(std::string_view id) const;
  std::vector<std::string> failed_ids() const;
};

struct CheckOptions {
  std::filesystem::path calbin_dir;
  std::optional<std::filesystem::path> service_manifest;
  // Physical usable memory per chip for the capacity inequality. The default is the
  // simulator's assumed 16 GiB until a card's real figure is measured.
  uint64_t usable_bytes_per_chip = uint64_t{16} << 30;
};

// The ids and titles of every check, in the order they run.
std::vector<std::pair<std::string, std::string>> check_catalog();

CheckReport run_checks(const CheckOptions& options);

struct Manifest;

// The checks a device's loader makes before it writes anything to device memory: units and
// overflow of the reservations, no overlap between them, every tensor inside its reservation,
// ping and pong buffers apart. The first failed check's first message, or nothing. A device
// that skipped these would let a bad calbin overwrite its own weights or KV cache, as hardware
// would.
std::optional<std::string> memory_plan_violation(const Manifest& manifest,
                                                 const std::string& manifest_file);

}  // namespace calbin
