#include "runner/conformance/conformance_command.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "abi/calrt_loader.hpp"
#include "runner/core/device/calbin_cache.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/core/report/jsonl.hpp"
#include "runner/core/report/markdown.hpp"
#include "runner/core/report/output_file.hpp"
#include "runner/core/report/progress.hpp"
#include "runner/core/report/report.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;

std::string group_of(const std::string& id) { return id.substr(0, id.find('.')); }

JunitCase::Outcome outcome_of(ClauseResult::Verdict verdict) {
  switch (verdict) {
    case ClauseResult::Verdict::pass:
      return JunitCase::Outcome::pass;
    case ClauseResult::Verdict::fail:
      return JunitCase::Outcome::fail;
    case ClauseResult::Verdict::skip:
      return JunitCase::Outcome::skip;
  }
  return JunitCase::Outcome::fail;
}

nlohmann::json to_json(const ClauseResult& r) {
  return {{"id", r.id},         {"group", group_of(r.id)},
          {"title", r.title},   {"verdict", to_string(r.verdict)},
          {"reason", r.reason}, {"seconds", r.seconds}};
}

Envelope envelope_of(const std::vector<ClauseResult>& results) {
  uint64_t counts[3] = {0, 0, 0};
  for (const ClauseResult& r : results) {
    ++counts[static_cast<int>(r.verdict)];
  }
  return {
      .schema = "calrt-conformance/1",
      .command = "conformance",
      .result = counts[1] == 0 ? Verdict::pass : Verdict::fail,
      .counts = {.unit = "clause", .passed = counts[0], .failed = counts[1], .skipped = counts[2]}};
}

nlohmann::json to_json(const ConformanceCommandOptions& options, const fs::path& calbin,
                       const std::vector<ClauseResult>& results) {
  nlohmann::json doc = {{"device", options.device},
                        {"device_config", options.device_config},
                        {"calbin", calbin.string()},
                        {"clauses", nlohmann::json::array()}};
  for (const ClauseResult& r : results) {
    doc["clauses"].push_back(to_json(r));
  }
  doc.update(to_json(envelope_of(results)));
  return doc;
}

MarkdownTable markdown_table(const std::vector<ClauseResult>& results) {
  MarkdownTable table{.title = "Clauses", .header = {"clause", "title", "verdict", "reason", "s"}};
  for (const ClauseResult& r : results) {
    table.rows.push_back(
        {r.id, r.title, to_string(r.verdict), r.reason, fmt::format("{:.2f}", r.seconds)});
  }
  return table;
}

// The calbin the suite runs on: --calbin as given, else the tiny preset in --calbin-dir.
fs::path resolve_calbin(const ConformanceCommandOptions& options) {
  if (!options.calbin.empty()) {
    return options.calbin;
  }
  CalbinStore store(options.calbin_dir, "calrt conformance");
  auto calbin = store.get("tiny");
  if (!calbin) {
    throw std::invalid_argument("--calbin-dir: " + calbin.error());
  }
  return (*calbin)->dir;
}

}  // namespace

std::vector<JunitSuite> conformance_junit_suites(const std::vector<ClauseResult>& results) {
  std::vector<JunitSuite> suites;
  for (const ClauseResult& r : results) {
    const std::string group = group_of(r.id);
    if (suites.empty() || suites.back().name != group) {
      suites.push_back({group, {}});
    }
    suites.back().cases.push_back(
        {"conformance." + group, r.id + " " + r.title, outcome_of(r.verdict), r.reason, r.seconds});
  }
  return suites;
}

int run_conformance_command(const ConformanceCommandOptions& options) {
  try {
    for (const auto& [flag, file] : {std::pair{"--junit", options.junit},
                                     {"--json", options.json},
                                     {"--md", options.md},
                                     {"--jsonl", options.jsonl}}) {
      if (file.empty() || file == "-") {
        continue;
      }
      if (const std::string why = check_output_path(flag, file); !why.empty()) {
        std::fprintf(stderr, "calrt conformance: %s\n", why.c_str());
        return kExitUsage;
      }
    }
    for (const std::string& prefix : options.only) {
      if (!conformance_prefix_known(prefix)) {
        std::fprintf(stderr,
                     "calrt conformance: --only: '%s' selects no clause (ids are GROUP.N, "
                     "abi/CONFORMANCE.md)\n",
                     prefix.c_str());
        return kExitUsage;
      }
    }
    const DeviceSpec spec = parse_device(options.device, options.device_kind, options.device_index,
                                         options.device_config);
    ConformanceOptions run_options;
    run_options.calbin = resolve_calbin(options);
    run_options.device_config = options.device_config;
    run_options.only = options.only;
    run_options.clause_timeout =
        std::chrono::milliseconds(static_cast<int64_t>(options.clause_timeout_s * 1000.0));
    run_options.suite_timeout =
        std::chrono::milliseconds(static_cast<int64_t>(options.suite_timeout_s * 1000.0));
    calrt::Api api;
    std::optional<std::string> refused;  // the loader's words for a runtime it would not take
    try {
      api = open_runtime(spec);
    } catch (const calrt::LoadError& error) {
      if (error.kind() == calrt::LoadErrorKind::open_failed) {
        std::fprintf(stderr, "calrt conformance: --device %s: %s\n", options.device.c_str(),
                     error.what());
        return kExitUsage;
      }
      refused = error.what();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "calrt conformance: --device %s: %s\n", options.device.c_str(),
                   error.what());
      return kExitUsage;
    }
    JsonlStream jsonl;
    if (!options.jsonl.empty()) {
      if (const std::string why = jsonl.open("--jsonl", options.jsonl); !why.empty()) {
        std::fprintf(stderr, "calrt conformance: %s\n", why.c_str());
        return kExitUsage;
      }
    }
    size_t counts[3] = {0, 0, 0};
    double seconds = 0.0;
    // Each clause's line is printed as it ends; the line below them says how far the suite is.
    Progress progress("clauses", conformance_selected_count(run_options),
                      options.progress && Progress::terminal());
    const auto on_result = [&](const ClauseResult& r) {
      progress.clear();
      nlohmann::json record = {{"record", "clause"}};
      record.update(to_json(r));
      jsonl.write(record);
      ++counts[static_cast<int>(r.verdict)];
      seconds += r.seconds;
      if (r.verdict == ClauseResult::Verdict::pass) {
        std::printf("PASS %s %s\n", r.id.c_str(), r.title.c_str());
      } else {
        std::printf("%s %s %s: %s\n", to_string(r.verdict), r.id.c_str(), r.title.c_str(),
                    r.reason.c_str());
      }
      std::fflush(stdout);
      progress.update(counts[0] + counts[1] + counts[2], r.id);
    };
    std::vector<ClauseResult> results;
    if (refused) {
      results = refused_runtime_results(run_options, *refused);
      for (const ClauseResult& r : results) on_result(r);
    } else {
      results = run_conformance(api, spec, run_options, on_result);
    }
    progress.clear();
    std::printf("%zu passed, %zu failed, %zu skipped\n", counts[0], counts[1], counts[2]);
    std::fflush(stdout);
    std::fprintf(stderr, "calrt conformance: %zu clauses in %.2f s on %s\n", results.size(),
                 seconds, describe(spec).c_str());
    int status = counts[1] > 0 ? kExitFail : kExitPass;
    jsonl.write_summary(envelope_of(results));
    if (!jsonl.error().empty()) {
      std::fprintf(stderr, "calrt conformance: %s\n", jsonl.error().c_str());
      status = status == kExitPass ? kExitUsage : status;
    }
    if (!options.md.empty()) {
      if (const std::string why = write_text_file(
              options.md, markdown_report(envelope_of(results), {markdown_table(results)}));
          !why.empty()) {
        std::fprintf(stderr, "calrt conformance: --md: %s\n", why.c_str());
        status = status == kExitPass ? kExitUsage : status;
      }
    }
    if (!options.junit.empty()) {
      if (const std::string why = write_junit_file(options.junit, "calrt conformance",
                                                   conformance_junit_suites(results));
          !why.empty()) {
        std::fprintf(stderr, "calrt conformance: --junit: %s\n", why.c_str());
        status = status == kExitPass ? kExitUsage : status;
      }
    }
    if (!options.json.empty()) {
      if (const std::string why =
              write_json_file(options.json, to_json(options, run_options.calbin, results));
          !why.empty()) {
        std::fprintf(stderr, "calrt conformance: --json: %s\n", why.c_str());
        status = status == kExitPass ? kExitUsage : status;
      }
    }
    return status;
  } catch (const std::invalid_argument& error) {
    std::fprintf(stderr, "calrt conformance: %s\n", error.what());
    return kExitUsage;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "calrt conformance: %s\n", error.what());
    return kExitFail;
  }
}

}  // namespace runner
