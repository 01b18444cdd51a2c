#include "runner/tools/check.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "calbin/acceptance/checks.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/core/report/report.hpp"

namespace runner {
namespace {

nlohmann::json to_json(const calbin::CheckReport& report) {
  nlohmann::json checks = nlohmann::json::array();
  Counts counts{.unit = "check"};
  for (const calbin::CheckResult& c : report.checks) {
    (c.status == calbin::CheckStatus::kPass   ? counts.passed
     : c.status == calbin::CheckStatus::kFail ? counts.failed
                                              : counts.skipped) += 1;
    checks.push_back({{"id", c.id},
                      {"title", c.title},
                      {"status", std::string(calbin::to_string(c.status))},
                      {"messages", c.messages}});
  }
  nlohmann::json doc = to_json(Envelope{.schema = "calrt-check/1",
                                        .command = "check",
                                        .result = report.passed() ? Verdict::pass : Verdict::fail,
                                        .counts = counts});
  doc.update({{"calbin", report.calbin_dir.string()},
              {"failed_ids", report.failed_ids()},
              {"checks", checks},
              {"warnings", report.warnings}});
  return doc;
}

void print(const calbin::CheckReport& report) {
  int counts[3] = {0, 0, 0};
  for (const calbin::CheckResult& c : report.checks) {
    ++counts[static_cast<int>(c.status)];
    std::printf("[%s] %-24s %s\n", std::string(calbin::to_string(c.status)).c_str(), c.id.c_str(),
                c.title.c_str());
    const char* mark = c.status == calbin::CheckStatus::kFail ? "-" : "~";
    for (const std::string& m : c.messages) {
      std::printf("       %s %s\n", mark, m.c_str());
    }
  }
  for (const std::string& w : report.warnings) {
    std::printf("warning: %s\n", w.c_str());
  }
  std::printf("check %s: %d passed, %d failed, %d skipped\n", report.passed() ? "PASS" : "FAIL",
              counts[0], counts[1], counts[2]);
}

}  // namespace

int run_check(const CheckCommandOptions& options) {
  if (options.list) {
    for (const auto& [id, title] : calbin::check_catalog()) {
      std::printf("%-24s %s\n", id.c_str(), title.c_str());
    }
    return kExitPass;
  }
  if (!options.json.empty()) {
    if (std::string problem = check_output_path("--json", options.json, options.calbin);
        !problem.empty()) {
      std::fprintf(stderr, "calrt check: %s\n", problem.c_str());
      return kExitUsage;
    }
  }
  // A calbin that is not there is bad input, as in inspect and smoke; a manifest that is there
  // but does not parse is a failed check (manifest.parse).
  if (std::error_code error; !std::filesystem::is_directory(options.calbin, error)) {
    std::fprintf(stderr, "calrt check: %s: not a calbin directory (no such directory)\n",
                 options.calbin.string().c_str());
    return kExitUsage;
  }
  // So is a --manifest file that is not there (one that is there but does not parse is the
  // failed check service.parse).
  if (std::error_code error; !options.service_manifest.empty() &&
                             !std::filesystem::is_regular_file(options.service_manifest, error)) {
    std::fprintf(stderr, "calrt check: --manifest '%s': no such file\n",
                 options.service_manifest.string().c_str());
    return kExitUsage;
  }
  calbin::CheckOptions check_options;
  check_options.calbin_dir = options.calbin;
  if (!options.service_manifest.empty()) {
    check_options.service_manifest = options.service_manifest;
  }
  check_options.usable_bytes_per_chip =
      static_cast<uint64_t>(options.usable_gib_per_chip * static_cast<double>(uint64_t{1} << 30));
  const calbin::CheckReport report = calbin::run_checks(check_options);
  print(report);
  if (!options.json.empty()) {
    if (std::string error = write_json_file(options.json, to_json(report)); !error.empty()) {
      std::fprintf(stderr, "calrt check: %s\n", error.c_str());
      return kExitUsage;
    }
  }
  return report.passed() ? kExitPass : kExitFail;
}

}  // namespace runner
