#include "runner/scenario/scenario_report.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "runner/scenario/scenario_checks.hpp"

namespace runner {
namespace {

std::string hash_text(const std::optional<uint64_t>& hash) {
  return hash ? fmt::format("0x{:016x}", *hash) : "n/a";
}

std::string outcome_text(const RunActual& a) {
  if (!a.recovered_by) {
    return to_string(a.outcome);
  }
  if (a.outcome == Outcome::recovered) {
    return fmt::format("recovered by {}", to_string(*a.recovered_by));
  }
  return fmt::format("{}, recovered by {}", to_string(a.outcome), to_string(*a.recovered_by));
}

nlohmann::json bug_list(const std::vector<PolicyBug>& bugs) {
  nlohmann::json out = nlohmann::json::array();
  for (const PolicyBug bug : bugs) {
    out.push_back(to_string(bug));
  }
  return out;
}

nlohmann::json expect_json(const Expect& e) {
  nlohmann::json out = nlohmann::json::object();
  if (e.outcome) {
    out["outcome"] = to_string(*e.outcome);
  }
  if (e.first_error) {
    out["first_error"] = calrt::code_name(*e.first_error);
  }
  if (e.fault_class) {
    out["fault_class"] = *e.fault_class;
  }
  if (e.device_state) {
    out["device_state"] = calrt::to_string(*e.device_state);
  }
  if (e.recovered_by) {
    out["recovered_by"] = level_name(*e.recovered_by);
  }
  if (e.resets) {
    out["resets"] = *e.resets;
  }
  if (e.max_call_ms) {
    out["max_call_ms"] = *e.max_call_ms;
  }
  if (!e.sequences.empty()) {
    out["sequences"] = nlohmann::json::object();
    for (const auto& [name, ok] : e.sequences) {
      out["sequences"][name] = ok ? "ok" : "failed";
    }
  }
  return out;
}

nlohmann::json actual_json(const RunActual& a) {
  nlohmann::json sequences = nlohmann::json::object();
  nlohmann::json failures = nlohmann::json::object();
  nlohmann::json greedy = nlohmann::json::object();
  for (const SequenceVerdict& v : a.sequences) {
    sequences[v.name] = v.ok ? "ok" : "failed";
    greedy[v.name] = {{"agreed", v.greedy_agree}, {"compared", v.greedy_total}};
    if (!v.ok) {
      failures[v.name] = {{"why", v.why}, {"golden_mismatch", v.mismatch}};
    }
  }
  return {{"outcome", to_string(a.outcome)},
          {"first_error", calrt::code_name(a.first_error)},
          {"fault_class", fault_class_name(a.first_error)},
          {"device_state", a.device_state},
          {"recovered_by", level_name(a.recovered_by)},
          {"resets", a.resets},
          {"max_call_ms", a.max_call_ms},
          {"sequences", sequences},
          {"sequence_failures", failures},
          {"greedy", greedy}};
}

}  // namespace

std::vector<std::pair<Outcome, uint32_t>> SweepResult::outcome_counts() const {
  std::vector<std::pair<Outcome, uint32_t>> counts;
  for (const SweepRun& run : runs) {
    auto found = std::find_if(counts.begin(), counts.end(),
                              [&](const auto& entry) { return entry.first == run.outcome; });
    if (found == counts.end()) {
      counts.emplace_back(run.outcome, 1);
    } else {
      ++found->second;
    }
  }
  return counts;
}

void Coverage::add(const std::vector<calrt::FaultHit>& hits) {
  for (const calrt::FaultHit& hit : hits) {
    auto row = std::find_if(rows_.begin(), rows_.end(), [&](const calrt::FaultHit& r) {
      return r.kind == hit.kind && r.site == hit.site;
    });
    if (row == rows_.end()) {
      rows_.push_back(hit);
    } else {
      row->count += hit.count;
    }
  }
}

void Coverage::print(std::FILE* out) const {
  if (rows_.empty()) {
    std::fprintf(out, "coverage: the runtime reports no fault hits (no fault extension)\n");
    return;
  }
  size_t reached = 0;
  for (const calrt::FaultHit& row : rows_) {
    reached += row.count > 0 ? 1 : 0;
  }
  std::fprintf(out, "coverage: %zu of %zu (kind, site) pairs hit\n", reached, rows_.size());
  std::fprintf(out, "  %-18s %-10s %8s\n", "kind", "site", "hits");
  for (const calrt::FaultHit& row : rows_) {
    std::fprintf(out, "  %-18s %-10s %8llu\n", row.kind.c_str(), row.site.c_str(),
                 static_cast<unsigned long long>(row.count));
  }
}

nlohmann::json Coverage::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const calrt::FaultHit& row : rows_) {
    out.push_back({{"kind", row.kind}, {"site", row.site}, {"count", row.count}});
  }
  return out;
}

std::string result_lines(const RunResult& r) {
  if (r.passed()) {
    return fmt::format("PASS {}  {}  device {:.3f} ms  state {}\n", r.name,
                       outcome_text(r.record.actual), r.record.device_ms,
                       hash_text(r.record.state_hash));
  }
  return fmt::format("FAIL {}: {}\n  replay: {}\n", r.name, fmt::join(r.mismatches, "; "),
                     r.replay);
}

std::string sweep_lines(const SweepResult& r) {
  std::vector<std::string> counts;
  for (const auto& [outcome, count] : r.outcome_counts()) {
    counts.push_back(fmt::format("{} x{}", to_string(outcome), count));
  }
  const std::string head = fmt::format("sweep {} {} {}", r.name, r.fault_kind, to_string(r.mode));
  if (r.passed()) {
    return fmt::format("PASS {}: {} runs, outcomes: {}\n", head, r.runs.size(),
                       fmt::join(counts, ", "));
  }
  return fmt::format("FAIL {}: {} runs, outcomes: {}; {}\n  replay: {}\n", head, r.runs.size(),
                     fmt::join(counts, ", "), fmt::join(r.failures, "; "), r.replay);
}

nlohmann::json to_json(const RunResult& r) {
  nlohmann::json doc = {
      {"kind", r.kind},
      {"name", r.name},
      {"file", r.file},
      {"description", r.description},
      {"seed", r.seed},
      {"policy_bug", to_string(r.bug)},
      {"result", r.passed() ? "PASS" : "FAIL"},
      {"mismatches", r.mismatches},
      {"actual", actual_json(r.record.actual)},
      {"state_hash", r.record.state_hash ? nlohmann::json(hash_text(r.record.state_hash))
                                         : nlohmann::json(nullptr)},
      {"plan", r.record.plan},
      {"hang_reports", r.record.hang_reports},
      {"device_ms", r.record.device_ms},
      {"calls", r.record.calls},
      {"negative_controls", bug_list(r.negative_controls)},
      {"events", r.record.events},
      {"replay", r.replay},
      {"leak_check", r.record.live_after_teardown
                         ? nlohmann::json{{"live", *r.record.live_after_teardown}}
                         : nlohmann::json(nullptr)},
      {"state_machine_violations", r.record.state_machine_violations
                                       ? nlohmann::json(*r.record.state_machine_violations)
                                       : nlohmann::json(nullptr)}};
  doc["expect"] = r.expect ? expect_json(*r.expect) : nlohmann::json(nullptr);
  return doc;
}

nlohmann::json to_json(const SweepResult& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (const SweepRun& run : r.runs) {
    runs.push_back({{"at_op", run.at_op},
                    {"outcome", to_string(run.outcome)},
                    {"injected", run.injected},
                    {"problems", run.problems}});
  }
  nlohmann::json outcomes = nlohmann::json::object();
  for (const auto& [outcome, count] : r.outcome_counts()) {
    outcomes[to_string(outcome)] = count;
  }
  return {{"name", r.name},
          {"file", r.file},
          {"fault_kind", r.fault_kind},
          {"mode", to_string(r.mode)},
          {"seed", r.seed},
          {"policy_bug", to_string(r.bug)},
          {"result", r.passed() ? "PASS" : "FAIL"},
          {"runs", runs},
          {"outcomes", outcomes},
          {"failures", r.failures},
          {"replay", r.replay}};
}

}  // namespace runner
