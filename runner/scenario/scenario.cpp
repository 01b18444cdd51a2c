// `calrt scenario`: everything is read and checked first (files, calbins and golden sets, the
// runtime, each scenario's device options and fault plan on a throw-away device), so bad
// input exits 2 before any scenario runs; then scenarios, a campaign or sweeps run, one line
// each, and a summary.
#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "runner/core/exit_codes.hpp"
#include "runner/core/report/jsonl.hpp"
#include "runner/core/report/junit.hpp"
#include "runner/core/report/markdown.hpp"
#include "runner/core/report/output_file.hpp"
#include "runner/core/report/report.hpp"
#include "runner/scenario/scenario_campaign.hpp"
#include "runner/scenario/scenario_checks.hpp"
#include "runner/scenario/scenario_context.hpp"
#include "runner/scenario/scenario_sweep.hpp"

namespace runner {
namespace {

// Bad input found before anything runs: the message names the file, field and value.
class CommandInputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ScenarioTotals {
  size_t passed = 0;
  size_t failed = 0;
  void add(bool pass) { (pass ? passed : failed) += 1; }
  size_t total() const { return passed + failed; }
  nlohmann::json to_json() const {
    return {{"total", total()}, {"passed", passed}, {"failed", failed}};
  }
};

class Command {
 public:
  explicit Command(const ScenarioOptions& options) : o_(options), context_(options) {}

  int run() {
    try {
      prepare();
    } catch (const CommandInputError& bad) {
      return bad_input(bad.what());
    }
    print_header();
    if (o_.campaign) {
      for (RunResult& result : run_campaign(
               context_, workload_, o_.seed.value_or(1), *o_.campaign, offered_, chips_,
               o_.shard.value_or(Shard{}),
               [this](const RunResult&r, uint64_t index) { stream(r.kind, to_json(r), index); })) {
        plans_.add(result.passed());
        runs_.push_back(std::move(result));
      }
    } else {
      for (size_t index = 0; index < scenarios_.size(); ++index) {
        const Scenario& scenario = scenarios_[index];
        if (o_.shard && !o_.shard->owns(index)) {
          continue;
        }
        if (o_.sweep || scenario.sweep) {
          for (SweepResult& result :
               run_sweep(context_, scenario, scenario.sweep.value_or(SweepSpec{}),
                         seed_of(scenario), offered_)) {
            sweep_totals_.add(result.passed());
            stream("sweep", to_json(result), index);
            sweeps_.push_back(std::move(result));
          }
        } else {
          run_file(scenario, index);
        }
      }
    }
    print_summary();
    if (o_.coverage) {
      context_.coverage.print(stdout);
    }
    const bool passed =
        scenario_totals_.failed == 0 && plans_.failed == 0 && sweep_totals_.failed == 0;
    return finish(passed ? "PASS" : "FAIL", "", passed ? kExitPass : kExitFail);
  }

 private:
  void prepare() {
    const auto bug = parse_policy_bug(o_.policy_bug);
    if (!bug) {
      throw CommandInputError("--policy-bug: '" + o_.policy_bug + "' is not a policy bug");
    }
    context_.bug = *bug;
    if (o_.campaign && (!o_.files.empty() || o_.sweep)) {
      throw CommandInputError("--campaign runs the built-in workload: give no FILE and no --sweep");
    }
    if (o_.campaign && *o_.campaign == 0) {
      throw CommandInputError("--campaign: 0 plans");
    }
    if (!o_.campaign && o_.files.empty()) {
      throw CommandInputError("give scenario FILEs (e.g. scenarios/*.yaml) or --campaign N");
    }
    try {
      context_.device = parse_device(o_.device);
    } catch (const std::exception& error) {
      throw CommandInputError(error.what());
    }
    for (const std::string& file : o_.files) {
      auto scenario = read_scenario_file(file);
      if (!scenario) {
        throw CommandInputError(scenario.error());
      }
      scenarios_.push_back(std::move(*scenario));
    }
    try {
      context_.api = open_runtime(context_.device);
    } catch (const std::exception& error) {
      throw CommandInputError(error.what());
    }
    if (o_.campaign) {
      const ScenarioCalbin* calbin = calbin_of("tiny");
      workload_ = campaign_workload(static_cast<uint32_t>(calbin->inputs.golden.cases.size()));
    }
    for (const Scenario& scenario : scenarios_) {
      const ScenarioCalbin* calbin = calbin_of(scenario.calbin);
      if (std::string bad = check_against_golden(scenario, calbin->inputs.golden); !bad.empty()) {
        throw CommandInputError(bad);
      }
    }
    const bool needs_faults = o_.campaign || o_.sweep ||
                              std::any_of(scenarios_.begin(), scenarios_.end(),
                                          [](const Scenario& s) { return s.sweep.has_value(); });
    if (needs_faults) {
      probe_offered_faults();
    }
    for (const Scenario& scenario : scenarios_) {
      const bool swept = o_.sweep || scenario.sweep;
      const std::string bad = context_.check_device_and_plan(
          scenario, seed_of(scenario), swept ? std::vector<FaultEntry>{} : scenario.faults);
      if (!bad.empty()) {
        throw CommandInputError(bad);
      }
    }
    for (const auto& [flag, file] : {std::pair{"--md", o_.md}, {"--jsonl", o_.jsonl}}) {
      if (file.empty() || file == "-") continue;
      if (std::string bad = check_output_path(flag, file); !bad.empty()) {
        throw CommandInputError(bad);
      }
    }
    if (!o_.jsonl.empty()) {
      if (std::string bad = jsonl_.open("--jsonl", o_.jsonl); !bad.empty()) {
        throw CommandInputError(bad);
      }
    }
  }

  // One --jsonl record: the run's report entry, tagged with what it is and its unit's index
  // in the whole run (a plan, or a scenario file with its sweeps): `calrt merge` orders by it.
  void stream(const std::string& record, const nlohmann::json& entry, uint64_t index) {
    nlohmann::json line = {{"record", record}, {"index", index}};
    line.update(entry);
    jsonl_.write(line);
  }

  const ScenarioCalbin* calbin_of(const std::string& preset) {
    auto calbin = context_.calbins.get(preset);
    if (!calbin) {
      throw CommandInputError(calbin.error());
    }
    return *calbin;
  }

  void probe_offered_faults() {
    try {
      const ScenarioContext::Offer offer = context_.offered_faults();
      offered_ = offer.faults;
      chips_ = offer.chips;
    } catch (const calrt::Error& error) {
      throw CommandInputError(std::string("cannot open a device to ask which faults it offers: ") +
                              error.what());
    }
    if (offered_.empty()) {
      throw CommandInputError(
          describe(context_.device) +
          ": the runtime offers no fault injection (CALRT_EXT_FAULT); campaigns and "
          "sweeps need the simulator");
    }
  }

  uint64_t seed_of(const Scenario& scenario) const { return o_.seed.value_or(scenario.seed); }

  void run_file(const Scenario& scenario, uint64_t index) {
    RunResult result;
    result.kind = "scenario";
    result.name = scenario.name;
    result.file = scenario.file;
    result.description = scenario.description;
    result.seed = seed_of(scenario);
    result.bug = context_.bug;
    result.expect = scenario.expect;
    result.negative_controls = scenario.negative_controls;
    result.record = context_.run(scenario, result.seed, scenario.faults);
    if (scenario.expect) {
      result.mismatches = expectation_mismatches(*scenario.expect, result.record.actual);
    }
    for (std::string& problem : run_problems(result.record)) {
      result.mismatches.push_back(std::move(problem));
    }
    result.replay =
        replay_command(fmt::format("{} --seed {}", scenario.file, result.seed), context_.bug);
    std::fputs(result_lines(result).c_str(), stdout);
    std::fflush(stdout);
    stream(result.kind, to_json(result), index);
    scenario_totals_.add(result.passed());
    runs_.push_back(std::move(result));
  }

  void print_header() const {
    std::string bug = context_.bug == PolicyBug::none
                          ? ""
                          : fmt::format(" [TEST ONLY: policy bug {}]", to_string(context_.bug));
    if (o_.shard) {
      bug += fmt::format(", shard {}/{}", o_.shard->index, o_.shard->count);
    }
    if (o_.campaign) {
      std::printf("calrt scenario: campaign of %u plans from seed %llu on %s%s\n", *o_.campaign,
                  static_cast<unsigned long long>(o_.seed.value_or(1)),
                  describe(context_.device).c_str(), bug.c_str());
    } else {
      std::printf("calrt scenario: %zu scenario file%s on %s%s\n", scenarios_.size(),
                  scenarios_.size() == 1 ? "" : "s", describe(context_.device).c_str(),
                  bug.c_str());
    }
    std::fflush(stdout);
  }

  void print_summary() const {
    auto line = [](const char* what, const ScenarioTotals& t) {
      std::printf("%zu %s: %zu passed, %zu failed\n", t.total(), what, t.passed, t.failed);
    };
    if (o_.campaign) {
      line("plans", plans_);
      return;
    }
    if (scenario_totals_.total() > 0 || sweep_totals_.total() == 0) {
      line("scenarios", scenario_totals_);
    }
    if (sweep_totals_.total() > 0) {
      line("sweeps", sweep_totals_);
    }
  }

  ScenarioTotals everything() const {
    ScenarioTotals all;
    all.passed = scenario_totals_.passed + plans_.passed + sweep_totals_.passed;
    all.failed = scenario_totals_.failed + plans_.failed + sweep_totals_.failed;
    return all;
  }

  Envelope envelope(const std::string& result, const std::string& error) const {
    const ScenarioTotals all = everything();
    return {.schema = kScenarioSchema,
            .command = "scenario",
            .result = verdict_from(result),
            .counts = {.unit = "run", .passed = all.passed, .failed = all.failed},
            .error = error};
  }

  // The markdown tables: every scenario and sweep; of a campaign, the plans that failed
  // (a thousand passing rows help no review; the counts line has them).
  std::vector<MarkdownTable> markdown_tables() const {
    const auto verdict = [](bool passed) { return std::string(passed ? "PASS" : "FAIL"); };
    MarkdownTable runs{
        .title = o_.campaign ? fmt::format("Failed plans: {} of {}", plans_.failed, plans_.total())
                             : "Scenarios",
        .header = {"run", "seed", "verdict", "device ms", "what failed", "replay"}};
    for (const RunResult& run : runs_) {
      if (run.kind == "plan" && run.passed()) continue;
      runs.rows.push_back({run.name, std::to_string(run.seed), verdict(run.passed()),
                           fmt::format("{:.3f}", run.record.device_ms),
                           fmt::format("{}", fmt::join(run.mismatches, "; ")),
                           run.passed() ? std::string() : run.replay});
    }
    MarkdownTable sweeps{.title = "Sweeps",
                         .header = {"sweep", "fault", "runs", "verdict", "what failed", "replay"}};
    for (const SweepResult& sweep : sweeps_) {
      sweeps.rows.push_back({sweep.name, sweep.fault_kind, std::to_string(sweep.runs.size()),
                             verdict(sweep.passed()),
                             fmt::format("{}", fmt::join(sweep.failures, "; ")),
                             sweep.passed() ? std::string() : sweep.replay});
    }
    std::vector<MarkdownTable> tables;
    if (!runs.rows.empty() || sweeps.rows.empty()) tables.push_back(std::move(runs));
    if (!sweeps.rows.empty()) tables.push_back(std::move(sweeps));
    return tables;
  }

  nlohmann::json report(const std::string& result, const std::string& error) const {
    nlohmann::json runs = nlohmann::json::array();
    for (const RunResult& run : runs_) {
      runs.push_back(to_json(run));
    }
    nlohmann::json sweeps = nlohmann::json::array();
    for (const SweepResult& sweep : sweeps_) {
      sweeps.push_back(to_json(sweep));
    }
    nlohmann::json controls = nlohmann::json::array();
    for (const Scenario& scenario : scenarios_) {
      nlohmann::json bugs = nlohmann::json::array();
      for (const PolicyBug bug : scenario.negative_controls) {
        bugs.push_back(to_string(bug));
      }
      controls.push_back({{"scenario", scenario.name}, {"file", scenario.file}, {"bugs", bugs}});
    }
    ScenarioTotals all = everything();
    nlohmann::json totals = all.to_json();
    totals["scenarios"] = scenario_totals_.to_json();
    totals["plans"] = plans_.to_json();
    totals["sweeps"] = sweep_totals_.to_json();
    nlohmann::json doc = to_json(envelope(result, error));
    doc.update({{"device", o_.device},
                {"policy_bug", o_.policy_bug},
                {"seed", o_.seed ? nlohmann::json(*o_.seed) : nlohmann::json(nullptr)},
                {"campaign", o_.campaign ? nlohmann::json(*o_.campaign) : nlohmann::json(nullptr)},
                {"files", o_.files},
                {"scenarios", runs},
                {"sweeps", sweeps},
                {"coverage", context_.coverage.to_json()},
                {"negative_controls", controls},
                {"totals", totals}});
    return doc;
  }

  int bad_input(const std::string& message) {
    std::fprintf(stderr, "calrt scenario: bad input: %s\n", message.c_str());
    return finish("ERROR", message, kExitUsage);
  }

  // Every run as a JUnit testcase: suites "scenarios", "plans" (a campaign) and "sweeps";
  // a failure's message is what did not hold, then the command that replays it alone.
  std::vector<JunitSuite> junit_suites(const std::string& error) const {
    JunitSuite scenarios{"scenarios", {}}, plans{"plans", {}}, sweeps{"sweeps", {}};
    auto outcome = [](bool passed) {
      return passed ? JunitCase::Outcome::pass : JunitCase::Outcome::fail;
    };
    for (const RunResult& run : runs_) {
      JunitCase c{"scenario." + run.kind,
                  run.name,
                  outcome(run.passed()),
                  {},
                  run.record.device_ms / 1000.0};
      if (!run.passed()) {
        c.message = fmt::format("{}\nreplay: {}", fmt::join(run.mismatches, "\n"), run.replay);
      }
      (run.kind == "plan" ? plans : scenarios).cases.push_back(std::move(c));
    }
    for (const SweepResult& sweep : sweeps_) {
      JunitCase c{"scenario.sweep", sweep.name, outcome(sweep.passed()), {}, 0.0};
      if (!sweep.passed()) {
        c.message = fmt::format("{}\nreplay: {}", fmt::join(sweep.failures, "\n"), sweep.replay);
      }
      sweeps.cases.push_back(std::move(c));
    }
    std::vector<JunitSuite> suites;
    if (!error.empty()) {
      suites.push_back(
          {"scenario", {{"scenario", "bad input", JunitCase::Outcome::fail, error, 0.0}}});
    }
    for (JunitSuite* s : {&scenarios, &plans, &sweeps}) {
      if (!s->cases.empty()) suites.push_back(std::move(*s));
    }
    return suites;
  }

  // Writes the reports asked for; a report that cannot be written turns a pass into a
  // usage error, since the caller asked for a file it will not get.
  int finish(const std::string& result, const std::string& error, int exit_code) {
    std::vector<std::string> errors;
    if (!o_.json.empty()) {
      if (std::string e = write_json_file(o_.json, report(result, error)); !e.empty()) {
        errors.push_back(e);
      }
    }
    if (!o_.junit.empty()) {
      if (std::string e = write_junit_file(o_.junit, "calrt scenario", junit_suites(error));
          !e.empty()) {
        errors.push_back("--junit: " + e);
      }
    }
    if (!o_.md.empty()) {
      if (std::string e =
              write_text_file(o_.md, markdown_report(envelope(result, error), markdown_tables()));
          !e.empty()) {
        errors.push_back("--md: " + e);
      }
    }
    jsonl_.write_summary(
        envelope(result, error),
        o_.shard ? nlohmann::json{{"shard", to_json(*o_.shard)}} : nlohmann::json::object());
    if (!jsonl_.error().empty()) {
      errors.push_back(jsonl_.error());
    }
    for (const std::string& e : errors) {
      std::fprintf(stderr, "calrt scenario: %s\n", e.c_str());
    }
    return errors.empty() || exit_code != kExitPass ? exit_code : kExitUsage;
  }

  const ScenarioOptions& o_;
  ScenarioContext context_;
  std::vector<Scenario> scenarios_;
  Scenario workload_;
  std::vector<calrt::FaultHit> offered_;
  uint32_t chips_ = 0;
  std::vector<RunResult> runs_;
  std::vector<SweepResult> sweeps_;
  ScenarioTotals scenario_totals_;
  ScenarioTotals plans_;
  ScenarioTotals sweep_totals_;
  JsonlStream jsonl_;
};

}  // namespace

int run_scenario(const ScenarioOptions& options) {
  try {
    return Command(options).run();
  } catch (const std::exception& error) {
    // Runs catch their own errors; this is the last line of defence against a bug here.
    std::fprintf(stderr, "calrt scenario: internal error: %s\n", error.what());
    return kExitFail;
  }
}

}  // namespace runner
