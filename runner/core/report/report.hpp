// The result of a runner command: one StepResult per step, printed as one terminal line
// each (plus indented failure and diagnosis lines), and a JSON document on request.
#pragma once

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/core/report/envelope.hpp"
#include "runner/core/report/output_file.hpp"

namespace runner {

enum class StepStatus { pass, fail, skip };
const char* to_string(StepStatus status);

struct StepResult {
  int number = 0;
  std::string name;
  StepStatus status = StepStatus::pass;
  double wall_ms = 0.0;
  std::string summary;                 // the key facts, one line
  std::vector<std::string> failures;   // why the step failed, one sentence each
  std::vector<std::string> diagnosis;  // what points at the cause, printed under the step
  nlohmann::json details = nlohmann::json::object();

  void fail(std::string message) {
    status = StepStatus::fail;
    failures.push_back(std::move(message));
  }
  bool passed() const { return status == StepStatus::pass; }
};

struct Report {
  std::string command;                                // e.g. "smoke"
  nlohmann::json context = nlohmann::json::object();  // inputs: calbin, device, options
  std::vector<StepResult> steps;
  nlohmann::json metrics = nlohmann::json::object();
  std::vector<std::string> summary;  // closing lines for the terminal
  std::string error;                 // bad input found before any step (exit 2); empty otherwise

  // True when there is at least one step and every step passed.
  bool passed() const;
  nlohmann::json to_json() const;
};

// "[PASS] 3 configure      12.5 ms  facts", then "       - failure" / "       > diagnosis".
void print_step(std::FILE* out, const StepResult& step);
// "smoke PASS: 8/8 steps passed" plus the report's summary lines.
void print_summary(std::FILE* out, const Report& report);

// Writes `doc` to `path` as write_text_file() (output_file.hpp) does. Returns an empty string
// on success, else why it failed, naming the path.
std::string write_json_file(const std::filesystem::path& path, const nlohmann::json& doc);

// Wall-clock milliseconds since construction (steady clock).
class Stopwatch {
 public:
  double elapsed_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
        .count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Bytes in MiB, for the human summaries.
// "1 case", "2 cases": a count with its noun in the right number (regular plurals only).
inline std::string count_of(uint64_t n, std::string_view noun) {
  return std::to_string(n) + " " + std::string(noun) + (n == 1 ? "" : "s");
}

inline double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

}  // namespace runner
