// Internal to the acceptance checks: what every check sees, and how a check reports.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "calbin/acceptance/checks.hpp"
#include "calbin/acceptance/service_manifest.hpp"
#include "calbin/manifest.hpp"

namespace calbin::acceptance {

struct CheckContext {
  const Manifest& manifest;
  std::filesystem::path dir;
  std::string manifest_file;                 // as named in messages
  const ServiceManifest* service = nullptr;  // null without --manifest
  std::string service_file;
  const CheckOptions& options;
};

// Records a failure; the message should quote the field path and the offending value.
inline void fail_check(CheckResult& result, std::string message) {
  result.status = CheckStatus::kFail;
  result.messages.push_back(std::move(message));
}

inline void skip_check(CheckResult& result, std::string reason) {
  if (result.status == CheckStatus::kPass) {
    result.status = CheckStatus::kSkip;
  }
  result.messages.push_back(std::move(reason));
}

using CheckFn = void (*)(const CheckContext&, CheckResult&);

struct CheckDef {
  const char* id;
  const char* title;
  CheckFn run;
};

// Each group lives in its own file.
void check_files_confined(const CheckContext&, CheckResult&);
void check_files_present(const CheckContext&, CheckResult&);
void check_files_size(const CheckContext&, CheckResult&);
void check_files_sha256(const CheckContext&, CheckResult&);
void check_model_types(const CheckContext&, CheckResult&);
void check_model_metadata(const CheckContext&, CheckResult&);
void check_model_names(const CheckContext&, CheckResult&);
void check_llm_shapes(const CheckContext&, CheckResult&);
void check_chip_mask(const CheckContext&, CheckResult&);
void check_reservation_bounds(const CheckContext&, CheckResult&);
void check_reservation_overlap(const CheckContext&, CheckResult&);
void check_tensors_in_reservation(const CheckContext&, CheckResult&);
void check_params_in_file(const CheckContext&, CheckResult&);
void check_ping_pong_aliasing(const CheckContext&, CheckResult&);
void check_memory_unit(const CheckContext&, CheckResult&);
void check_memory_capacity(const CheckContext&, CheckResult&);
void check_golden_index(const CheckContext&, CheckResult&);
void check_service_models(const CheckContext&, CheckResult&);
void check_service_dimensions(const CheckContext&, CheckResult&);
void check_service_chip_mask(const CheckContext&, CheckResult&);
void check_service_dtypes(const CheckContext&, CheckResult&);
void check_service_tensors(const CheckContext&, CheckResult&);
void check_service_versions(const CheckContext&, CheckResult&);

}  // namespace calbin::acceptance
