// `calrt check CALBIN [--manifest service.yaml]`: static acceptance of a calbin, device-free.
// Every blocking item of stage 8 is a named check; exit 0 only when none fails.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace runner {

struct CheckCommandOptions {
  std::filesystem::path calbin;
  std::filesystem::path service_manifest;  // empty: the service checks are skipped
  std::filesystem::path json;              // empty: no JSON report
  double usable_gib_per_chip = 16.0;
  bool list = false;  // print the catalog of checks and exit
};

int run_check(const CheckCommandOptions& options);

}  // namespace runner
