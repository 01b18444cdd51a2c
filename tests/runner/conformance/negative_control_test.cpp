// The conformance suite must notice broken runtimes, clause by clause:
//  (a) each negative-control library, run by `calrt conformance`, fails exactly the clauses
//      its mutation breaks, as written down here from the clause texts of
//      abi/CONFORMANCE.md (never from a run);
//  (b) every documented clause fails under at least one mutation (the table below), and
//      every documented clause id is in that table or listed as unbreakable with a reason.
// The unmutated forwarding table passes everything, so a failure under a mutation is the
// mutation's doing, not the forwarding's.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <ostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "abi/calrt_loader.hpp"
#include "runner/conformance/conformance.hpp"
#include "tests/runner/calrt_process.hpp"
#include "tests/runner/conformance/mutant_runtime.hpp"

namespace {

using runner::ClauseResult;

std::filesystem::path calbin_path() {
  const char* env = std::getenv("CALRT_TEST_CALBIN");
  return env != nullptr ? std::filesystem::path(env) : std::filesystem::path(CALRT_TEST_CALBIN);
}

// ---------------------------------------------------------------------------------------
// (a) The negative-control libraries and the clauses each must fail, with why.
// ---------------------------------------------------------------------------------------
struct Control {
  const char* library;
  const char* mutation;
  std::set<std::string> fails;
};

const std::vector<Control>& controls() {
  static const std::vector<Control> list = {
      // BUF.1: a truncated model name is taken for the real one. JOB.2 submits under an
      // "unknown model name", which the runner picks so that it is part of no model's name:
      // the substring Job_Submit accepts goes unnoticed there. CAL.6 catches it: Job_Submit
      // of the prefill model's name without its last character runs the prefill.
      {CALRT_NEG_substring_model_name, "substring-model-name", {"BUF.1", "CAL.6"}},
      // KV.2: context + 1 is allocated; KV.3 and KV.7: allocations never run out. KV.4 allocates 8
      // tokens, which fit, and the job past them is still refused by the device.
      {CALRT_NEG_kv_overflow_success, "kv-overflow-success", {"KV.2", "KV.3", "KV.7"}},
      // JOB.4: a 10 ms wait on a hung job lasts 10 s. THR.2: the waiter's 2 s wait lasts
      // 2000 s, so the device's watchdog ends the job (DEVICE_HUNG) before the other
      // thread's cancel does. JOB.5 and JOB.6 see their short wait end READY (the job done)
      // and skip; NEV.1 waits with the default, which the mutation leaves alone.
      // JOB.11's 100 ms wait, on the paced clock, lasts until the watchdog ends the hung job
      // (READY, not NOT_READY).
      {CALRT_NEG_ignore_wait_timeout, "ignore-wait-timeout", {"JOB.4", "JOB.11", "THR.2"}},
      // MAP.4: a buffer an in-flight job owns maps (a shadow) instead of BUSY.
      {CALRT_NEG_map_while_in_flight, "map-while-in-flight", {"MAP.4"}},
      // ERR.2: the failed DMA reports INVALID_ARGUMENT; JOB.8 and NEV.1: the watchdog's
      // DEVICE_HUNG comes out as INVALID_ARGUMENT. RST.3 and RST.4 cause device faults too
      // but only check the device's state, which the mutation leaves alone.
      {CALRT_NEG_device_fault_as_request, "device-fault-as-request", {"ERR.2", "JOB.8", "NEV.1"}},
      // VER.5: a too-small struct is accepted. ERR.1 provokes each request-class code,
      // STRUCT_TOO_SMALL among them, which this runtime never returns. VER.6's old
      // Job_Status size is accepted anyway, as it must be.
      {CALRT_NEG_wrong_struct_size, "wrong-struct-size", {"ERR.1", "VER.5"}},
      // VER.2: CalrtGetApi answers another major with a table.
      {CALRT_NEG_any_major, "any-major", {"VER.2"}},
  };
  return list;
}

// Test names carry the parameter as printed: the mutation, not the struct's bytes (which
// hold pointers and would change from one run to the next).
void PrintTo(const Control& control, std::ostream* out) { *out << control.mutation; }

// ---------------------------------------------------------------------------------------
// (b) For every clause, a mutation under which it fails; and the clauses no forwarding
// mutation can reach.
// ---------------------------------------------------------------------------------------
struct Breaker {
  const char* clause;
  const char* mutation;
};

const std::vector<Breaker>& breakers() {
  static const std::vector<Breaker> list = {
      {"VER.1", "status-wrong-abi"},
      {"VER.2", "any-major"},
      {"VER.3", "short-table"},
      {"VER.5", "wrong-struct-size"},
      {"VER.5", "small-struct-kv-info"},
      {"VER.6", "larger-struct-rejected"},
      {"HDL.1", "query-invalid-handle-ok"},
      {"HDL.2", "query-invalid-handle-ok"},
      {"HDL.2", "cancel-invalid-handle-ok"},
      {"HDL.3", "double-free-ok"},
      {"HDL.4", "query-invalid-handle-ok"},
      {"ERR.1", "model-fault-as-device"},
      {"ERR.2", "device-fault-as-request"},
      {"ERR.3", "error-message-empty"},
      {"ERR.4", "error-message-empty"},
      {"ERR.5", "error-message-shared"},
      {"ERR.6", "error-destroy-leaks"},
      {"CAL.1", "model-fault-as-device"},
      {"CAL.2", "model-fault-as-device"},
      {"CAL.3", "info-wrong-vocab"},
      {"CAL.4", "model-index-unchecked"},
      {"CAL.5", "tensor-index-unchecked"},
      {"CAL.6", "case-insensitive-model-name"},
      {"CFG.1", "configure-no-memory"},
      {"CFG.2", "configure-no-memory"},
      {"CFG.3", "configure-twice-ok"},
      {"CFG.4", "model-fault-as-device"},
      {"CFG.5", "configure-time-zero"},
      {"CFG.5", "configure-time-inflated"},
      {"BUF.1", "substring-model-name"},
      {"BUF.2", "map-size-short"},
      {"BUF.3", "buffer-args-unchecked"},
      {"MAP.1", "unmap-discards-writes"},
      {"MAP.2", "double-map-ok"},
      {"MAP.3", "unmap-unchecked"},
      {"MAP.4", "map-while-in-flight"},
      {"MAP.5", "submit-unmaps"},
      {"CSR.1", "csr-truncated"},
      {"CSR.2", "csr-out-of-range-ok"},
      {"CSR.3", "csr-on-output-ok"},
      {"JOB.1", "job-timestamps-unordered"},
      {"JOB.2", "submit-errors-as-busy"},
      {"JOB.3", "busy-as-wrong-state"},
      {"JOB.4", "ignore-wait-timeout"},
      {"JOB.5", "cancel-ignored"},
      {"JOB.6", "lost-wakeup"},
      {"JOB.7", "destroy-leaves-job-running"},
      {"JOB.8", "device-fault-as-request"},
      {"JOB.9", "wait-state-unwritten"},
      {"JOB.10", "default-timeout-no-wait"},
      {"JOB.11", "wait-oversleeps"},
      {"JOB.11", "wait-busy-polls"},
      {"PAR.1", "parallel-mode-ignored"},
      {"PAR.2", "parallel-mode-ignored"},
      {"PAR.3", "parallel-mode-ignored"},
      {"KV.1", "kv-capacity-stale"},
      {"KV.2", "kv-overflow-success"},
      {"KV.3", "kv-overflow-success"},
      {"KV.4", "kv-rounds-up"},
      {"KV.5", "kv-clear-ignored"},
      {"KV.6", "kv-apply-unchecked"},
      {"KV.8", "kv-apply-any-row"},
      {"VER.7", "zero-outs-unwritten"},
      {"CSR.4", "past-kv-ignored"},
      {"CSR.4", "cur-seq-len-corrected"},
      {"KV.7", "kv-overflow-success"},
      {"KV.7", "kv-shrinks"},
      {"KV.7", "kv-free-is-largest"},
      {"RST.1", "reset-escalates"},
      {"RST.2", "reset-downgrades"},
      {"RST.3", "reset-keeps-faulted"},
      {"RST.4", "reset-level-unchecked"},
      {"THR.1", "concurrent-calls-busy"},
      {"THR.2", "cancel-ignored"},
      {"NEV.1", "device-fault-as-request"},
      {"NEV.2", "buffer-reuse-completes"},
      {"NEV.3", "buffer-args-unchecked"},
      {"NEV.4", "job-request-fault-as-device"},
      {"NEV.5", "status-null-firmware"},
  };
  return list;
}

void PrintTo(const Breaker& breaker, std::ostream* out) {
  *out << breaker.clause << " under " << breaker.mutation;
}

// Clauses that no mutation of the runtime's behaviour can make fail, and why.
const std::map<std::string, std::string>& unbreakable() {
  static const std::map<std::string, std::string> list = {
      {"VER.4",
       "checks the caller's wrapper (calrt::Api answers UNIMPLEMENTED for a NULL or cut-off "
       "entry) on a copy of the table the check edits itself; the runtime is never called"},
  };
  return list;
}

// The library that serves `mutation`, for clauses that need the backend's entry point.
const char* library_of(const std::string& mutation) {
  for (const Control& control : controls()) {
    if (mutation == control.mutation) {
      return control.library;
    }
  }
  return nullptr;
}

std::vector<ClauseResult> run_on(const std::string& mutation, std::vector<std::string> only) {
  runner::ConformanceOptions options;
  options.calbin = calbin_path();
  options.only = std::move(only);
  runner::DeviceSpec spec;
  // A clause about the entry point (VER.2) needs the library; the rest run in process.
  if (const char* library = library_of(mutation); library != nullptr && mutation == "any-major") {
    spec.backend = runner::DeviceSpec::Backend::library;
    spec.target = library;
    return runner::run_conformance(calrt::load_runtime(library), spec, options);
  }
  const CalrtApi* table = calrt::mutant::mutant_api(mutation);
  EXPECT_NE(table, nullptr) << "no mutation " << mutation;
  return runner::run_conformance(calrt::Api(table), spec, options);
}

std::string describe(const std::vector<ClauseResult>& results) {
  std::ostringstream out;
  for (const ClauseResult& result : results) {
    if (result.verdict != ClauseResult::Verdict::pass) {
      out << "  " << result.id << " " << runner::to_string(result.verdict) << ": " << result.reason
          << "\n";
    }
  }
  return out.str();
}

std::set<std::string> failed(const std::vector<ClauseResult>& results) {
  std::set<std::string> ids;
  for (const ClauseResult& result : results) {
    if (result.verdict == ClauseResult::Verdict::fail) {
      ids.insert(result.id);
    }
  }
  return ids;
}

// Every clause id documented in abi/CONFORMANCE.md: the first cell of a table row.
std::set<std::string> documented_clause_ids() {
  std::ifstream file(CALRT_CONFORMANCE_MD);
  EXPECT_TRUE(file) << "cannot read " << CALRT_CONFORMANCE_MD;
  const std::regex row(R"(^\|\s*([A-Z]+\.[0-9]+)\s*\|)");
  std::set<std::string> ids;
  for (std::string line; std::getline(file, line);) {
    if (std::smatch match; std::regex_search(line, match, row)) {
      ids.insert(match[1]);
    }
  }
  return ids;
}

std::string join(const std::set<std::string>& ids) {
  std::string text;
  for (const auto& id : ids) {
    text += (text.empty() ? "" : " ") + id;
  }
  return text;
}

// ---------------------------------------------------------------------------------------

class NegativeControl : public testing::TestWithParam<Control> {};

// Through the command a user runs: `calrt conformance --device LIBRARY --json FILE`.
TEST_P(NegativeControl, FailsExactlyTheClausesItBreaks) {
  const Control& control = GetParam();
  const std::filesystem::path json =
      std::filesystem::path(testing::TempDir()) / (std::string(control.mutation) + ".json");
  std::filesystem::remove(json);
  const CalrtRun run = run_calrt("conformance --device " + quoted(control.library) + " --calbin " +
                                 quoted(calbin_path()) + " --json " + quoted(json));
  EXPECT_EQ(run.exit_code, 1) << "a failed clause exits 1\n" << run.output;
  std::ifstream file(json);
  ASSERT_TRUE(file) << "no JSON report at " << json << "\n" << run.output;
  const auto report = nlohmann::json::parse(file);
  std::set<std::string> fails;
  for (const auto& clause : report.at("clauses")) {
    if (clause.at("verdict") == "FAIL") {
      fails.insert(clause.at("id").get<std::string>());
    }
  }
  EXPECT_EQ(join(fails), join(control.fails)) << run.output;
  EXPECT_EQ(report.at("counts").at("failed").get<size_t>(), control.fails.size());
}

INSTANTIATE_TEST_SUITE_P(Libraries, NegativeControl, testing::ValuesIn(controls()),
                         [](const testing::TestParamInfo<Control>& param) {
                           std::string name = param.param.mutation;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(ClauseTable, EveryDocumentedClauseHasABreakerOrAReason) {
  const std::set<std::string> documented = documented_clause_ids();
  ASSERT_GE(documented.size(), 14u) << "abi/CONFORMANCE.md lost its clause tables";
  std::set<std::string> covered;
  for (const Breaker& breaker : breakers()) {
    covered.insert(breaker.clause);
  }
  for (const auto& [id, reason] : unbreakable()) {
    EXPECT_FALSE(covered.contains(id)) << id << " is both broken and unbreakable";
    EXPECT_FALSE(reason.empty()) << id;
    covered.insert(id);
  }
  std::set<std::string> missing, stale;
  std::set_difference(documented.begin(), documented.end(), covered.begin(), covered.end(),
                      std::inserter(missing, missing.end()));
  std::set_difference(covered.begin(), covered.end(), documented.begin(), documented.end(),
                      std::inserter(stale, stale.end()));
  EXPECT_TRUE(missing.empty()) << "documented clauses no mutation breaks: " << join(missing);
  EXPECT_TRUE(stale.empty()) << "clauses in the table but not in CONFORMANCE.md: " << join(stale);
}

TEST(ClauseTable, EveryMutationIsUsed) {
  std::set<std::string> used = {"none"};
  for (const Breaker& breaker : breakers()) {
    used.insert(breaker.mutation);
  }
  for (const Control& control : controls()) {
    used.insert(control.mutation);
  }
  std::set<std::string> known;
  for (const auto& mutation : calrt::mutant::mutations()) {
    known.insert(std::string(mutation.name));
  }
  EXPECT_EQ(join(used), join(known)) << "a mutation no clause catches, or a table entry naming "
                                        "no mutation";
}

TEST(ClauseTable, TheForwardingTableItselfPassesEverything) {
  const auto results = run_on("none", {});
  EXPECT_TRUE(failed(results).empty()) << describe(results);
}

// The whole suite under a mutation: exactly the clauses the breakers table gives it fail.
// For the mutations whose whole-suite run is quick (no mutated wait or hang to sit out). Its
// own ctest, conformance_mutations_exact, labelled `calibration`: seven whole suites cost
// 42 s under the sanitizers and check the suite's verdicts, not memory safety.
TEST(ClauseTable, QuickMutationsFailExactlyTheirClauses) {
  for (const char* mutation :
       {"zero-outs-unwritten", "kv-shrinks", "kv-free-is-largest", "error-destroy-leaks",
        "status-null-firmware", "past-kv-ignored", "cur-seq-len-corrected", "kv-apply-any-row"}) {
    std::set<std::string> expected;
    for (const Breaker& breaker : breakers()) {
      if (breaker.mutation == mutation) expected.insert(breaker.clause);
    }
    ASSERT_FALSE(expected.empty()) << mutation;
    std::set<std::string> failing;
    for (const ClauseResult& r : run_on(mutation, {})) {
      if (r.verdict == ClauseResult::Verdict::fail) failing.insert(r.id);
    }
    EXPECT_EQ(join(failing), join(expected)) << mutation;
  }
}

class ClauseBreaker : public testing::TestWithParam<Breaker> {};

TEST_P(ClauseBreaker, ClauseFailsUnderItsMutation) {
  const Breaker& breaker = GetParam();
  const auto results = run_on(breaker.mutation, {breaker.clause});
  ASSERT_EQ(results.size(), 1u) << describe(results);
  EXPECT_EQ(results.front().id, breaker.clause);
  // Why the clause failed, in the XML report: a failure for the wrong reason (a setup step
  // the mutation broke instead of the requirement) shows there.
  RecordProperty("reason", results.front().reason);
  EXPECT_EQ(results.front().verdict, ClauseResult::Verdict::fail)
      << breaker.clause << " under " << breaker.mutation << ": "
      << runner::to_string(results.front().verdict) << " " << results.front().reason;
}

// Named after the clause, and after the mutation too when a clause has several breakers.
INSTANTIATE_TEST_SUITE_P(Clauses, ClauseBreaker, testing::ValuesIn(breakers()),
                         [](const testing::TestParamInfo<Breaker>& param) {
                           size_t breakers_of_clause = 0;
                           for (const Breaker& b : breakers()) {
                             breakers_of_clause += std::string(b.clause) == param.param.clause;
                           }
                           std::string name = param.param.clause;
                           if (breakers_of_clause > 1) {
                             name += std::string("_") + param.param.mutation;
                           }
                           std::replace(name.begin(), name.end(), '.', '_');
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
