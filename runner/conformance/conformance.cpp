#include "runner/conformance/conformance.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "runner/conformance/clause_process.hpp"
#include "runner/conformance/clauses/clauses.hpp"
#include "runner/conformance/scratch_dir.hpp"

namespace runner {

const char* to_string(ClauseResult::Verdict verdict) {
  switch (verdict) {
    case ClauseResult::Verdict::pass:
      return "PASS";
    case ClauseResult::Verdict::fail:
      return "FAIL";
    case ClauseResult::Verdict::skip:
      return "SKIP";
  }
  return "?";
}

const std::vector<Clause>& conformance_clauses() {
  static const std::vector<Clause> clauses = [] {
    std::vector<Clause> all;
    for (auto part : {clauses_ver, clauses_hdl, clauses_err, clauses_cal, clauses_cfg, clauses_buf,
                      clauses_map, clauses_csr, clauses_job, clauses_par, clauses_kv, clauses_rst,
                      clauses_thr, clauses_nev}) {
      for (Clause& clause : part()) {
        all.push_back(std::move(clause));
      }
    }
    return all;
  }();
  return clauses;
}

namespace {

namespace fs = std::filesystem;

// "KV" selects KV.1, KV.2, ...; "KV.1" selects KV.1 only, not KV.10.
bool selects(const std::string& prefix, const std::string& id) {
  if (id.rfind(prefix, 0) != 0) {
    return false;
  }
  return id.size() == prefix.size() || prefix.back() == '.' ||
         (prefix.find('.') == std::string::npos && id[prefix.size()] == '.');
}

bool selected(const ConformanceOptions& options, const std::string& id) {
  if (options.only.empty()) {
    return true;
  }
  for (const std::string& prefix : options.only) {
    if (selects(prefix, id)) {
      return true;
    }
  }
  return false;
}

ChildVerdict run_clause_body(const calrt::Api& api, const DeviceSpec& spec,
                             const ConformanceOptions& options, const calbin::Manifest& manifest,
                             CalrtGetApiFn* get_api, const fs::path& scratch,
                             const Clause& clause) {
  using Kind = ChildVerdict::Kind;
  try {
    ClauseContext context(api, spec, options, manifest, get_api, scratch);
    clause.check(context);
    return {Kind::pass, ""};
  } catch (const ClauseSkip& skip) {
    return {Kind::skip, skip.what()};
  } catch (const ClauseFailure& failure) {
    return {Kind::fail, failure.what()};
  } catch (const calrt::EntryBeyondTable& error) {
    // calrt.h lets a runtime of an older minor version end its table early: what the clause
    // needs is not there to test.
    return {Kind::skip, error.function() + " is beyond the runtime's table (an older minor " +
                            "version of calrt.h): " + error.message()};
  } catch (const calrt::Error& error) {
    return {Kind::fail,
            fmt::format("{} ({} fault)", error.what(), calrt::to_string(error.fault_class()))};
  } catch (const std::exception& error) {
    return {Kind::fail, error.what()};
  } catch (...) {
    return {Kind::fail, "a non-standard exception"};
  }
}

ClauseResult::Verdict verdict_of(ChildVerdict::Kind kind) {
  switch (kind) {
    case ChildVerdict::Kind::pass:
      return ClauseResult::Verdict::pass;
    case ChildVerdict::Kind::skip:
      return ClauseResult::Verdict::skip;
    case ChildVerdict::Kind::fail:
      break;
  }
  return ClauseResult::Verdict::fail;
}

}  // namespace

std::vector<ClauseResult> refused_runtime_results(const ConformanceOptions& options,
                                                  const std::string& why) {
  std::vector<ClauseResult> results;
  for (const Clause& clause : conformance_clauses()) {
    if (clause.id == "VER.1") {
      results.push_back({clause.id, clause.title, ClauseResult::Verdict::fail,
                         "the runtime was refused at load: " + why, 0.0});
    } else if (selected(options, clause.id)) {
      results.push_back({clause.id, clause.title, ClauseResult::Verdict::skip,
                         "not run: the runtime was refused at load (VER.1)", 0.0});
    }
  }
  return results;
}

size_t conformance_selected_count(const ConformanceOptions& options) {
  size_t count = 0;
  for (const Clause& clause : conformance_clauses()) {
    count += selected(options, clause.id) ? 1 : 0;
  }
  return count;
}

bool conformance_prefix_known(const std::string& prefix) {
  if (prefix.empty()) {
    return false;
  }
  for (const Clause& clause : conformance_clauses()) {
    if (selects(prefix, clause.id)) {
      return true;
    }
  }
  return false;
}

namespace {

// The calls every clause's fixture makes before its own check.
constexpr std::string_view kFixtureCalls[] = {
    "Device_Create:", "Calbin_Create:", "Calbin_Configure:"};

bool is_fixture_failure(const std::string& reason) {
  for (const std::string_view call : kFixtureCalls) {
    if (reason.starts_with(call)) return true;
  }
  return false;
}

std::string fixture_call(const std::string& reason) { return reason.substr(0, reason.find(':')); }

}  // namespace

std::vector<ClauseResult> run_conformance(const calrt::Api& api, const DeviceSpec& spec,
                                          const ConformanceOptions& options) {
  return run_conformance(api, spec, options, {});
}

std::vector<ClauseResult> run_conformance(
    const calrt::Api& api, const DeviceSpec& spec, const ConformanceOptions& options,
    const std::function<void(const ClauseResult&)>& on_result) {
  for (const std::string& prefix : options.only) {
    if (!conformance_prefix_known(prefix)) {
      throw std::invalid_argument("--only: '" + prefix +
                                  "' selects no clause (ids are GROUP.N, abi/CONFORMANCE.md)");
    }
  }
  auto manifest = calbin::read_manifest(options.calbin);
  if (!manifest) {
    throw std::invalid_argument("--calbin: " + manifest.error().to_string());
  }
  if (auto verified = calbin::verify_files(options.calbin, *manifest); !verified) {
    throw std::invalid_argument("--calbin: " + verified.error().to_string());
  }
  // The clauses read full logits rows: a calbin that ranks on the device is not theirs to
  // judge, and failing them would blame the runtime.
  for (const calbin::Model& model : manifest->models) {
    for (const calbin::TensorDesc& tensor : model.outputs) {
      if (tensor.role == calbin::TensorRole::kTopIds) {
        throw std::invalid_argument(
            "--calbin " + options.calbin.string() + ": model \"" + model.name +
            "\" ranks on the device (output \"" + tensor.name +
            "\" has role top_ids); the clauses drive full logits rows (simdev gen --preset tiny)");
      }
    }
  }
  if (!api) {
    throw std::invalid_argument("no runtime table");
  }
  CalrtGetApiFn* get_api = runtime_entry_point(api, spec);

  using Clock = std::chrono::steady_clock;
  const auto suite_deadline = options.suite_timeout.count() > 0
                                  ? Clock::now() + options.suite_timeout
                                  : Clock::time_point::max();
  // The clauses' files; removed here even when a clause's process dies first. A temporary
  // directory that cannot hold them is the caller's environment: bad input.
  std::optional<ScratchDir> scratch;
  try {
    scratch.emplace(fs::temp_directory_path(), "calrt-conformance");
  } catch (const std::exception& error) {
    const char* tmpdir = std::getenv("TMPDIR");
    throw std::invalid_argument(std::string("no scratch directory for the clauses (TMPDIR=") +
                                (tmpdir != nullptr ? tmpdir : "") + "): " + error.what());
  }
  std::vector<ClauseResult> results;
  // A runtime that cannot open a device (or load the calbin) fails every clause the same
  // way in its fixture. The first clause says so; the others are not checked, and say that
  // instead of repeating the same failure 60 times.
  std::map<std::string, std::string> fixture_failures;  // reason -> the clause that failed first
  for (const Clause& clause : conformance_clauses()) {
    if (!selected(options, clause.id)) {
      continue;
    }
    ClauseResult result;
    result.id = clause.id;
    result.title = clause.title;
    const auto start = Clock::now();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(suite_deadline - start);
    if (left.count() <= 0) {
      // Reported, not dropped: a report that lists fewer clauses would read as a pass.
      result.verdict = ClauseResult::Verdict::fail;
      result.reason = fmt::format("not run: the suite's --timeout of {} s was spent",
                                  static_cast<double>(options.suite_timeout.count()) / 1000.0);
    } else {
      const ChildVerdict verdict = run_in_child(
          [&] {
            return run_clause_body(api, spec, options, *manifest, get_api, scratch->path(), clause);
          },
          std::min(options.clause_timeout, left));
      result.verdict = verdict_of(verdict.kind);
      result.reason = verdict.reason;
      if (result.verdict == ClauseResult::Verdict::fail && is_fixture_failure(result.reason)) {
        const auto [first, inserted] = fixture_failures.emplace(result.reason, clause.id);
        if (!inserted) {
          result.verdict = ClauseResult::Verdict::skip;
          result.reason = fmt::format("not checked: its fixture failed as in {} ({})",
                                      first->second, fixture_call(result.reason));
        }
      }
    }
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (on_result) {
      on_result(result);
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace runner
