#include "runner/core/report/report.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

namespace runner {

const char* to_string(StepStatus status) {
  switch (status) {
    case StepStatus::pass:
      return "PASS";
    case StepStatus::fail:
      return "FAIL";
    case StepStatus::skip:
      return "SKIP";
  }
  return "?";
}

bool Report::passed() const {
  if (steps.empty()) {
    return false;
  }
  for (const StepResult& step : steps) {
    if (!step.passed()) {
      return false;
    }
  }
  return true;
}

nlohmann::json Report::to_json() const {
  Counts counts{.unit = "step"};
  for (const StepResult& step : steps) {
    (step.status == StepStatus::pass   ? counts.passed
     : step.status == StepStatus::fail ? counts.failed
                                       : counts.skipped) += 1;
  }
  nlohmann::json doc = runner::to_json(Envelope{.schema = "calrt-" + command + "/1",
                                                .command = command,
                                                .result = !error.empty() ? Verdict::error
                                                          : passed()     ? Verdict::pass
                                                                         : Verdict::fail,
                                                .counts = counts,
                                                .error = error});
  doc["context"] = context;
  doc["steps"] = nlohmann::json::array();
  for (const StepResult& step : steps) {
    doc["steps"].push_back({{"number", step.number},
                            {"name", step.name},
                            {"status", to_string(step.status)},
                            {"wall_ms", step.wall_ms},
                            {"summary", step.summary},
                            {"failures", step.failures},
                            {"diagnosis", step.diagnosis},
                            {"details", step.details}});
  }
  doc["metrics"] = metrics;
  return doc;
}

void print_step(std::FILE* out, const StepResult& step) {
  std::fprintf(out, "[%s] %d %-10s %9.1f ms  %s\n", to_string(step.status), step.number,
               step.name.c_str(), step.wall_ms, step.summary.c_str());
  // The terminal shows the first failures; the JSON report keeps them all.
  constexpr size_t kMaxPrinted = 8;
  for (size_t i = 0; i < step.failures.size() && i < kMaxPrinted; ++i) {
    std::fprintf(out, "       - %s\n", step.failures[i].c_str());
  }
  if (step.failures.size() > kMaxPrinted) {
    std::fprintf(out, "       - ... %zu more failures in the JSON report\n",
                 step.failures.size() - kMaxPrinted);
  }
  for (const std::string& line : step.diagnosis) {
    std::fprintf(out, "       > %s\n", line.c_str());
  }
  std::fflush(out);
}

void print_summary(std::FILE* out, const Report& report) {
  size_t passed = 0;
  for (const StepResult& step : report.steps) {
    passed += step.passed() ? 1 : 0;
  }
  std::fprintf(out, "%s %s: %zu/%zu steps passed\n", report.command.c_str(),
               report.passed() ? "PASS" : "FAIL", passed, report.steps.size());
  for (const std::string& line : report.summary) {
    std::fprintf(out, "  %s\n", line.c_str());
  }
  std::fflush(out);
}

std::string write_json_file(const std::filesystem::path& path, const nlohmann::json& doc) {
  // Replacing invalid UTF-8 keeps a device's garbage message from making dump() throw.
  return write_text_file(path,
                         doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + '\n');
}

}  // namespace runner
