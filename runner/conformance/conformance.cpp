#include "runner/conformance/conformance.hpp"

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "runner/conformance/clauses/clauses.hpp"

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

// A clause that has not returned after this much wall time is failed and abandoned: a
// runtime call that never returns must not hang the suite.
constexpr auto kClauseWallGuard = std::chrono::seconds(60);

// What a clause's thread needs, owned jointly by the thread and the runner so that an
// abandoned clause still finds it alive.
struct ClauseRun {
  calrt::Api api;
  DeviceSpec spec;
  ConformanceOptions options;
  calbin::Manifest manifest;
  CalrtGetApiFn* get_api = nullptr;
  Clause clause;

  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  ClauseResult::Verdict verdict = ClauseResult::Verdict::pass;
  std::string reason;
};

void run_clause_body(ClauseRun& run) {
  ClauseResult::Verdict verdict = ClauseResult::Verdict::pass;
  std::string reason;
  try {
    ClauseContext context(run.api, run.spec, run.options, run.manifest, run.get_api);
    run.clause.check(context);
  } catch (const ClauseSkip& skip) {
    verdict = ClauseResult::Verdict::skip;
    reason = skip.what();
  } catch (const ClauseFailure& failure) {
    verdict = ClauseResult::Verdict::fail;
    reason = failure.what();
  } catch (const calrt::EntryBeyondTable& error) {
    // calrt.h lets a runtime of an older minor version end its table early: what the clause
    // needs is not there to test.
    verdict = ClauseResult::Verdict::skip;
    reason = error.function() + " is beyond the runtime's table (an older minor version of " +
             "calrt.h): " + error.message();
  } catch (const calrt::Error& error) {
    verdict = ClauseResult::Verdict::fail;
    reason = fmt::format("{} ({} fault)", error.what(), calrt::to_string(error.fault_class()));
  } catch (const std::exception& error) {
    verdict = ClauseResult::Verdict::fail;
    reason = error.what();
  } catch (...) {
    verdict = ClauseResult::Verdict::fail;
    reason = "a non-standard exception";
  }
  const std::lock_guard lock(run.mutex);
  run.verdict = verdict;
  run.reason = std::move(reason);
  run.done = true;
  run.done_cv.notify_all();
}

}  // namespace

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
  if (!api) {
    throw std::invalid_argument("no runtime table");
  }
  CalrtGetApiFn* get_api = runtime_entry_point(api, spec);

  std::vector<ClauseResult> results;
  for (const Clause& clause : conformance_clauses()) {
    if (!selected(options, clause.id)) {
      continue;
    }
    auto run = std::make_shared<ClauseRun>();
    run->api = api;
    run->spec = spec;
    run->options = options;
    run->manifest = *manifest;
    run->get_api = get_api;
    run->clause = clause;
    const auto start = std::chrono::steady_clock::now();
    std::thread worker([run] { run_clause_body(*run); });
    ClauseResult result;
    result.id = clause.id;
    result.title = clause.title;
    std::unique_lock lock(run->mutex);
    if (run->done_cv.wait_for(lock, kClauseWallGuard, [&] { return run->done; })) {
      lock.unlock();
      worker.join();
      result.verdict = run->verdict;
      result.reason = run->reason;
    } else {
      lock.unlock();
      worker.detach();
      result.verdict = ClauseResult::Verdict::fail;
      result.reason = fmt::format("did not return within {} s of wall time (abandoned)",
                                  kClauseWallGuard.count());
    }
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (on_result) {
      on_result(result);
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace runner
