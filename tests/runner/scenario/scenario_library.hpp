// What the scenario-library tests share: the scenario files of scenarios/ (read with yaml-cpp,
// not through the runner, so a runner bug cannot hide a file), the fault kinds and policy bugs
// as the documentation lists them (parsed from the markdown tables, not asked of the program,
// so a kind documented without a scenario fails a test), and running `calrt scenario` with
// its stdout and stderr kept apart.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace scenario_test {

namespace fs = std::filesystem;

inline std::string read_text(const fs::path& path) {
  std::ifstream stream(path, std::ios::binary);
  std::ostringstream text;
  text << stream.rdbuf();
  return text.str();
}

inline std::string quoted(const fs::path& path) { return "'" + path.string() + "'"; }

// Every scenarios/*.yaml, sorted by name.
inline std::vector<fs::path> scenario_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(CALRT_SCENARIO_DIR)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// A file with a `sweep:` section is an exhaustive sweep, not a scenario with expectations.
inline bool is_sweep(const fs::path& file) {
  try {
    return YAML::LoadFile(file.string())["sweep"].IsDefined();
  } catch (const YAML::Exception&) {
    return false;  // not for this helper to judge; the library test reports it
  }
}

// The library proper: every scenario file that is not a sweep.
inline std::vector<fs::path> library_files() {
  std::vector<fs::path> files;
  for (const fs::path& file : scenario_files()) {
    if (!is_sweep(file)) {
      files.push_back(file);
    }
  }
  return files;
}

inline std::vector<fs::path> sweep_files() {
  std::vector<fs::path> files;
  for (const fs::path& file : scenario_files()) {
    if (is_sweep(file)) {
      files.push_back(file);
    }
  }
  return files;
}

inline std::string joined_paths(const std::vector<fs::path>& files) {
  std::string out;
  for (const fs::path& file : files) {
    out += " " + quoted(file);
  }
  return out;
}

// The first column, in backticks, of the table that follows `heading` in a markdown file:
// "| `dma_h2d` | ..." gives dma_h2d. The table ends at the first line that is not a row.
inline std::vector<std::string> first_column_of_table(const fs::path& markdown,
                                                      const std::string& heading_or_header) {
  std::istringstream lines(read_text(markdown));
  std::string line;
  bool found = false;
  bool in_table = false;
  std::vector<std::string> out;
  static const std::regex row(R"(^\|\s*`([^`]+)`\s*\|)");
  while (std::getline(lines, line)) {
    if (!found) {
      found = line.rfind(heading_or_header, 0) == 0;
      continue;
    }
    const bool is_row = !line.empty() && line[0] == '|';
    if (!is_row) {
      if (in_table) {
        break;
      }
      continue;
    }
    in_table = true;
    std::smatch match;
    if (std::regex_search(line, match, row)) {
      out.push_back(match[1].str());
    }
  }
  return out;
}

// The fault kinds of simdev/device/FAULTS.md's "Kinds" table.
inline std::vector<std::string> documented_fault_kinds() {
  return first_column_of_table(CALRT_FAULTS_MD, "## Kinds");
}

// The policy bugs of scenarios/README.md's negative-control table.
inline std::vector<std::string> documented_policy_bugs() {
  return first_column_of_table(fs::path(CALRT_SCENARIO_DIR) / "README.md", "| bug |");
}

// The fault kinds a scenario file's plan names.
// A key's node only when the map has it (yaml-cpp throws on asking a missing key's type).
inline bool has_sequence(const YAML::Node& map, const char* key) {
  return map.IsMap() && map[key].IsDefined() && map[key].IsSequence();
}

inline std::set<std::string> planned_kinds(const YAML::Node& doc) {
  std::set<std::string> kinds;
  if (has_sequence(doc, "faults")) {
    for (const auto& fault : doc["faults"]) {
      if (fault.IsMap() && fault["kind"].IsDefined() && fault["kind"].IsScalar()) {
        kinds.insert(fault["kind"].Scalar());
      }
    }
  }
  return kinds;
}

inline std::vector<std::string> negative_controls(const YAML::Node& doc) {
  std::vector<std::string> bugs;
  if (has_sequence(doc, "negative_controls")) {
    for (const auto& bug : doc["negative_controls"]) {
      bugs.push_back(bug.Scalar());
    }
  }
  return bugs;
}

struct CalrtOutput {
  int exit_code = -1;  // -1: killed by a signal (a crash)
  std::string out;     // stdout only
  std::string err;     // stderr only
};

// Runs `calrt ARGS` with stdout and stderr captured apart (stderr through a file in `scratch`).
inline CalrtOutput run_calrt_split(const std::string& args, const fs::path& scratch) {
  const fs::path err_file = scratch / ("stderr." + std::to_string(::getpid()) + ".txt");
  const std::string command = std::string("'") + CALRT_EXE + "' " + args + " 2>" + quoted(err_file);
  CalrtOutput run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return run;
  }
  char chunk[4096];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof(chunk), pipe)) > 0) {
    run.out.append(chunk, got);
  }
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.err = read_text(err_file);
  fs::remove(err_file);
  return run;
}

// The options every run of the tests passes: the fixture's calbins (DIR/tiny).
inline std::string calbin_dir_option() {
  return std::string(" --calbin-dir ") + quoted(CALRT_TEST_CALBIN_DIR);
}

}  // namespace scenario_test
