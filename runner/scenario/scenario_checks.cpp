#include "runner/scenario/scenario_checks.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

namespace runner {
namespace {

template <class T>
void compare(std::vector<std::string>& out, const char* field, const T& expected, const T& actual) {
  if (!(expected == actual)) {
    out.push_back(fmt::format("{}: expected {}, actual {}", field, expected, actual));
  }
}

}  // namespace

std::string level_name(const std::optional<calrt::ResetLevel>& level) {
  return level ? to_string(*level) : "none";
}

std::vector<std::string> expectation_mismatches(const Expect& e, const RunActual& a) {
  std::vector<std::string> out;
  if (e.outcome) {
    compare<std::string>(out, "outcome", to_string(*e.outcome), to_string(a.outcome));
  }
  if (e.first_error) {
    compare(out, "first_error", calrt::code_name(*e.first_error), calrt::code_name(a.first_error));
  }
  if (e.fault_class) {
    compare<std::string>(out, "fault_class", *e.fault_class, fault_class_name(a.first_error));
  }
  if (e.device_state) {
    compare<std::string>(out, "device_state", calrt::to_string(*e.device_state), a.device_state);
  }
  if (e.recovered_by) {
    compare(out, "recovered_by", level_name(*e.recovered_by), level_name(a.recovered_by));
  }
  if (e.resets) {
    compare(out, "resets", *e.resets, a.resets);
  }
  if (e.max_call_ms && !(a.max_call_ms <= *e.max_call_ms)) {
    out.push_back(
        fmt::format("max_call_ms: expected <= {}, actual {:.3f}", *e.max_call_ms, a.max_call_ms));
  }
  for (const auto& [name, ok] : e.sequences) {
    const auto found =
        std::find_if(a.sequences.begin(), a.sequences.end(),
                     [&wanted = name](const SequenceVerdict& v) { return v.name == wanted; });
    const bool actual_ok = found == a.sequences.end() || found->ok;
    if (ok != actual_ok) {
      out.push_back(fmt::format("sequences.{}: expected {}, actual {}{}", name,
                                ok ? "ok" : "failed", actual_ok ? "ok" : "failed",
                                actual_ok ? "" : " (" + found->why + ")"));
    }
  }
  return out;
}

std::vector<std::string> run_problems(const RunRecord& r) {
  std::vector<std::string> out;
  for (const std::string& error : r.engine_errors) {
    out.push_back("engine: " + error);
  }
  if (r.live_after_teardown && *r.live_after_teardown != 0) {
    out.push_back(fmt::format("leak: {} objects alive after teardown ({})", *r.live_after_teardown,
                              r.live_detail));
  }
  if (r.state_machine_violations && *r.state_machine_violations != 0) {
    out.push_back(
        fmt::format("state machine violations: {} (expected 0)", *r.state_machine_violations));
  }
  return out;
}

std::vector<std::string> invariant_violations(const RunRecord& r, const InvariantContext& c) {
  std::vector<std::string> out = run_problems(r);
  const double bound = c.timeout_ms + r.longest_reset_ms;
  if (r.actual.max_call_ms > bound) {
    out.push_back(fmt::format(
        "bound: a call took {:.3f} ms of device time, more than the timeout {} ms plus the "
        "longest reset {:.3f} ms",
        r.actual.max_call_ms, c.timeout_ms, r.longest_reset_ms));
  }
  if (!c.corruption_planned && c.bug == PolicyBug::none) {
    for (const SequenceVerdict& v : r.actual.sequences) {
      if (v.mismatch) {
        out.push_back(
            fmt::format("sequence {} failed by a golden mismatch without "
                        "corrupted_output in the plan: {}",
                        v.name, v.why));
      }
    }
  }
  if (std::find(all_outcomes().begin(), all_outcomes().end(), r.actual.outcome) ==
      all_outcomes().end()) {
    out.push_back("outcome: not one of the five");
  }
  return out;
}

}  // namespace runner
