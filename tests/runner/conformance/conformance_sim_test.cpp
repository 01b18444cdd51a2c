// The simulator passes every clause, in process and through libcalrt_sim.so, with no skip
// (it offers every extension the clauses use); a runtime that gets a clause wrong, or throws,
// fails that clause and leaves the process and the other clauses alone.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/sanitized.hpp"

#include "runner/conformance/conformance.hpp"

namespace {

using runner::ClauseResult;

std::string failures(const std::vector<ClauseResult>& results) {
  std::string text;
  for (const ClauseResult& r : results) {
    if (r.verdict != ClauseResult::Verdict::pass) {
      text += std::string(runner::to_string(r.verdict)) + " " + r.id + ": " + r.reason + "\n";
    }
  }
  return text;
}

runner::ConformanceOptions options(std::vector<std::string> only = {}) {
  runner::ConformanceOptions o;
  o.calbin = CALRT_TEST_CALBIN;
  o.only = std::move(only);
  return o;
}

void expect_all_pass(const runner::DeviceSpec& spec) {
  const calrt::Api api = runner::open_runtime(spec);
  const std::vector<ClauseResult> results = runner::run_conformance(api, spec, options());
  EXPECT_EQ(results.size(), runner::conformance_clauses().size());
  EXPECT_EQ(failures(results), "");
}

TEST(ConformanceSim, InProcessPassesEveryClause) {
  if (!runner::in_process_simulator_available()) {
    GTEST_SKIP() << "built without the in-process simulator";
  }
  expect_all_pass(runner::parse_device("sim"));
}

TEST(ConformanceSim, SharedLibraryPassesEveryClause) {
  expect_all_pass(runner::parse_device(CALRT_SIM_SO));
}

TEST(ConformanceSim, OnlySelectsByPrefix) {
  const runner::DeviceSpec spec = runner::parse_device(CALRT_SIM_SO);
  const calrt::Api api = runner::open_runtime(spec);
  std::vector<std::string> streamed;
  const std::vector<ClauseResult> results =
      runner::run_conformance(api, spec, options({"KV", "JOB.4"}),
                              [&](const ClauseResult& r) { streamed.push_back(r.id); });
  std::vector<std::string> ids;
  for (const ClauseResult& r : results) {
    ids.push_back(r.id);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"JOB.4", "KV.1", "KV.2", "KV.3", "KV.4", "KV.5", "KV.6",
                                           "KV.7", "KV.8"}));
  EXPECT_EQ(streamed, ids);
}

TEST(ConformanceSim, BadOptionsAreInvalidArguments) {
  const runner::DeviceSpec spec = runner::parse_device(CALRT_SIM_SO);
  const calrt::Api api = runner::open_runtime(spec);
  EXPECT_THROW(runner::run_conformance(api, spec, options({"NOPE"})), std::invalid_argument);
  runner::ConformanceOptions missing = options();
  missing.calbin = "/nonexistent/calbin";
  EXPECT_THROW(runner::run_conformance(api, spec, missing), std::invalid_argument);
}

// A runtime that drops CSR writes, and one whose GetModel throws through the C ABI.
CalrtError* dropping_set_csr(Calrt_Buffer_SetCsr_Args*) { return nullptr; }
CalrtError* throwing_get_model(Calrt_Calbin_GetModel_Args*) {
  throw std::runtime_error("runtime bug: GetModel threw");
}

// Under AddressSanitizer a segfault is reported and ends the process with status 1, and
// LeakSanitizer may turn an exit(0) into status 23: there only the common words are checked.
using calrt_test::kSanitized;

// Runtimes that take their process down from inside Calbin_Create, and one that never
// returns from Job_Wait.
CalrtError* segfaulting_calbin_create(Calrt_Calbin_Create_Args*) {
  std::raise(SIGSEGV);
  return nullptr;
}
CalrtError* aborting_calbin_create(Calrt_Calbin_Create_Args*) { std::abort(); }
CalrtError* exiting_calbin_create(Calrt_Calbin_Create_Args*) { std::exit(0); }
CalrtError* hanging_job_wait(Calrt_Job_Wait_Args*) {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// The simulator's table with `mutate` applied, borrowing the library that `sim` keeps loaded.
template <class Mutate>
calrt::Api mutated(const calrt::Api& sim, CalrtApi& storage, Mutate&& mutate) {
  storage = *sim.table();
  mutate(storage);
  return calrt::Api(&storage, std::shared_ptr<const void>(sim.table(), [sim](const void*) {}));
}

TEST(ConformanceSim, BrokenRuntimeFailsItsClausesNotTheProcess) {
  const runner::DeviceSpec spec = runner::parse_device(CALRT_SIM_SO);
  const calrt::Api sim = runner::open_runtime(spec);
  static CalrtApi dropping;
  static CalrtApi throwing;
  const calrt::Api drops =
      mutated(sim, dropping, [](CalrtApi& t) { t.Buffer_SetCsr = &dropping_set_csr; });
  const calrt::Api throws =
      mutated(sim, throwing, [](CalrtApi& t) { t.Calbin_GetModel = &throwing_get_model; });
  const std::vector<ClauseResult> csr =
      runner::run_conformance(drops, spec, options({"CSR.1", "VER.2", "KV.1"}));
  ASSERT_EQ(csr.size(), 3u);
  EXPECT_EQ(csr[0].id, "VER.2");  // not the library's own table: no entry point to ask
  EXPECT_EQ(csr[0].verdict, ClauseResult::Verdict::skip) << csr[0].reason;
  EXPECT_EQ(csr[1].id, "CSR.1");
  EXPECT_EQ(csr[1].verdict, ClauseResult::Verdict::fail);
  EXPECT_NE(csr[1].reason.find("read back"), std::string::npos) << csr[1].reason;
  EXPECT_EQ(csr[2].id, "KV.1");
  EXPECT_EQ(csr[2].verdict, ClauseResult::Verdict::pass) << csr[2].reason;

  const std::vector<ClauseResult> cal = runner::run_conformance(throws, spec, options({"CAL.4"}));
  ASSERT_EQ(cal.size(), 1u);
  EXPECT_EQ(cal[0].verdict, ClauseResult::Verdict::fail);
  EXPECT_NE(cal[0].reason.find("GetModel threw"), std::string::npos) << cal[0].reason;
}

// A runtime that segfaults, aborts or calls exit(0) ends only the process of the clause it
// was called from: that clause fails saying how, the next clause runs, and the caller gets
// every result (the command then writes its reports). Without the child processes the
// first of these ended the suite, and the exit(0) made `calrt conformance` exit 0.
TEST(ConformanceSim, ARuntimeThatEndsTheProcessFailsOnlyThatClause) {
  const runner::DeviceSpec spec = runner::parse_device(CALRT_SIM_SO);
  const calrt::Api sim = runner::open_runtime(spec);
  static CalrtApi tables[3];
  using Create = CalrtError* (*)(Calrt_Calbin_Create_Args*);
  const std::pair<Create, const char*> cases[] = {
      {&segfaulting_calbin_create, "killed by signal 11"},
      {&aborting_calbin_create, "killed by signal 6"},
      {&exiting_calbin_create, "exited with status 0"}};
  for (size_t i = 0; i < 3; ++i) {
    const calrt::Api api =
        mutated(sim, tables[i], [&](CalrtApi& t) { t.Calbin_Create = cases[i].first; });
    const std::vector<ClauseResult> results =
        runner::run_conformance(api, spec, options({"VER.1", "CAL.1", "CAL.2"}));
    ASSERT_EQ(results.size(), 3u) << cases[i].second;
    EXPECT_EQ(results[0].verdict, ClauseResult::Verdict::pass) << results[0].reason;
    for (size_t r = 1; r < 3; ++r) {  // CAL.2 ran after CAL.1's process had died
      EXPECT_EQ(results[r].id, r == 1 ? "CAL.1" : "CAL.2");
      EXPECT_EQ(results[r].verdict, ClauseResult::Verdict::fail);
      const std::string expected = kSanitized ? "before the clause returned" : cases[i].second;
      EXPECT_NE(results[r].reason.find(expected), std::string::npos) << results[r].reason;
    }
  }
}

// A Job_Wait that never returns costs one clause timeout per clause that waits, the suite's
// budget bounds the whole run, and the clauses left over are reported, not dropped.
TEST(ConformanceSim, HungWaitsAreKilledAndTheSuiteBudgetReportsTheRest) {
  const runner::DeviceSpec spec = runner::parse_device(CALRT_SIM_SO);
  const calrt::Api sim = runner::open_runtime(spec);
  static CalrtApi hanging;
  const calrt::Api api = mutated(sim, hanging, [](CalrtApi& t) { t.Job_Wait = &hanging_job_wait; });
  runner::ConformanceOptions o = options({"VER.1", "JOB"});
  o.clause_timeout = std::chrono::milliseconds(300);
  o.suite_timeout = std::chrono::milliseconds(800);
  const auto start = std::chrono::steady_clock::now();
  const std::vector<ClauseResult> results = runner::run_conformance(api, spec, o);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t killed = 0, not_run = 0;
  for (const ClauseResult& r : results) {
    if (r.reason.find("its process was killed") != std::string::npos) ++killed;
    if (r.reason.find("not run: the suite's --timeout") != std::string::npos) ++not_run;
    EXPECT_LE(r.seconds, 1.0) << r.id;
  }
  EXPECT_EQ(
      results.size(),
      1 + std::count_if(runner::conformance_clauses().begin(), runner::conformance_clauses().end(),
                        [](const runner::Clause& c) { return c.group == "JOB"; }));
  EXPECT_GE(killed, 2u);
  EXPECT_GE(not_run, 1u);
  EXPECT_LT(seconds, 5.0);  // the budget, plus one clause's bound, plus process start-up
}

// calrt.h lets a runtime of an older minor version end its table before Kv_Capacity: the
// clauses that need it skip, naming it, and THR.2 (which calls it while another thread
// waits) neither fails nor takes the process down.
TEST(ConformanceSim, AnOlderTableWithoutKvCapacitySkipsWhatNeedsIt) {
  const runner::DeviceSpec spec = runner::parse_device(CALRT_SIM_SO);
  const calrt::Api sim = runner::open_runtime(spec);
  static CalrtApi older;
  const calrt::Api api =
      mutated(sim, older, [](CalrtApi& t) { t.struct_size = offsetof(CalrtApi, Kv_Capacity); });
  const std::vector<ClauseResult> results =
      runner::run_conformance(api, spec, options({"THR", "KV"}));
  size_t skipped = 0;
  for (const ClauseResult& r : results) {
    EXPECT_NE(r.verdict, ClauseResult::Verdict::fail) << r.id << ": " << r.reason;
    if (r.verdict == ClauseResult::Verdict::skip) {
      EXPECT_NE(r.reason.find("Kv_Capacity"), std::string::npos) << r.id << ": " << r.reason;
      EXPECT_NE(r.reason.find("older minor"), std::string::npos) << r.id << ": " << r.reason;
      ++skipped;
    }
  }
  EXPECT_GT(skipped, 0u);
  const auto thr2 = std::find_if(results.begin(), results.end(),
                                 [](const ClauseResult& r) { return r.id == "THR.2"; });
  ASSERT_NE(thr2, results.end());
  EXPECT_EQ(thr2->verdict, ClauseResult::Verdict::skip) << thr2->reason;
}

}  // namespace
