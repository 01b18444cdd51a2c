#include "runner/scenario/scenario_campaign.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "runner/core/report/progress.hpp"
#include "runner/core/sampling.hpp"
#include "runner/scenario/scenario_checks.hpp"

namespace runner {
namespace {

// Rates from rare to frequent on a log scale: a rate of 0.2 faults nearly every job of the
// workload, 0.002 almost none, and both ends find different bugs.
constexpr double kMinRate = 0.002;
constexpr double kMaxRate = 0.2;
constexpr double kPersistentChance = 0.125;
constexpr double kSiteChance = 0.5;  // restrict a kind to one of its sites, else any

bool chance(SplitMix64& rng, double p) { return rng.uniform() < p; }

bool takes_chip(const std::string& kind) {
  return kind == "chip_hang" || kind == "ecc_correctable" || kind == "ecc_uncorrectable" ||
         kind == "thermal_throttle";
}

}  // namespace

Scenario campaign_workload(uint32_t cases) {
  // Case 4 (17 tokens) is one prefill chunk, case 7 (257) two on the tiny preset; a smaller
  // golden set falls back to its last cases.
  const uint32_t last = cases == 0 ? 0 : cases - 1;
  const uint32_t one_chunk = std::min<uint32_t>(4, last);
  const uint32_t two_chunks = std::min<uint32_t>(7, last);
  Scenario s;
  s.file = "";
  s.name = "campaign";
  s.description = "built-in campaign workload";
  s.calbin = "tiny";
  auto step = [&](StepKind kind, const std::string& seq = {}, uint32_t count = 0,
                  uint32_t golden_case = 0) {
    Step st;
    st.kind = kind;
    st.seq = seq;
    st.count = count;
    st.golden_case = golden_case;
    s.steps.push_back(st);
  };
  step(StepKind::configure);
  step(StepKind::prefill, "a", 0, one_chunk);
  step(StepKind::prefill, "b", 0, two_chunks);
  step(StepKind::decode, "a", 2);
  step(StepKind::decode, "b", 2);
  step(StepKind::decode, "a", 2);
  step(StepKind::decode, "b", 2);
  step(StepKind::kv_allocate, "x", 64);
  step(StepKind::kv_free, "x");
  step(StepKind::kv_clear, "a");
  step(StepKind::prefill, "a", 0, one_chunk);
  step(StepKind::decode, "a", 2);
  step(StepKind::kv_free, "a");
  step(StepKind::kv_free, "b");
  return s;
}

std::vector<FaultEntry> random_plan(uint64_t seed, const std::vector<calrt::FaultHit>& offered,
                                    uint32_t chips) {
  std::vector<std::string> kinds;
  for (const calrt::FaultHit& hit : offered) {
    if (std::find(kinds.begin(), kinds.end(), hit.kind) == kinds.end()) {
      kinds.push_back(hit.kind);
    }
  }
  SplitMix64 rng(seed);
  std::vector<bool> chosen(kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k) {
    chosen[k] = chance(rng, 0.5);
  }
  if (!kinds.empty() && std::none_of(chosen.begin(), chosen.end(), [](bool b) { return b; })) {
    chosen[rng.below(kinds.size())] = true;
  }
  std::vector<FaultEntry> plan;
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (!chosen[k]) {
      continue;
    }
    FaultEntry fault;
    fault.fields.emplace_back("kind", kinds[k]);
    std::vector<std::string> sites;
    for (const calrt::FaultHit& hit : offered) {
      if (hit.kind == kinds[k]) {
        sites.push_back(hit.site);
      }
    }
    if (sites.size() > 1 && chance(rng, kSiteChance)) {
      fault.fields.emplace_back("during", sites[rng.below(sites.size())]);
    }
    const double rate = kMinRate * std::pow(kMaxRate / kMinRate, rng.uniform());
    fault.fields.emplace_back("probability", fmt::format("{:.3g}", rate));
    if (chance(rng, kPersistentChance)) {
      fault.fields.emplace_back("persistent", "true");
    }
    if (takes_chip(kinds[k]) && chips > 1) {
      fault.fields.emplace_back("chip", std::to_string(rng.below(chips)));
    }
    plan.push_back(std::move(fault));
  }
  return plan;
}

std::vector<RunResult> run_campaign(
    ScenarioContext& context, const Scenario& workload, uint64_t first_seed, uint32_t count,
    const std::vector<calrt::FaultHit>& offered, uint32_t chips, const Shard& shard,
    const std::function<void(const RunResult&, uint64_t)>& on_result) {
  std::vector<RunResult> results;
  const uint64_t owned = count / shard.count + (shard.index < count % shard.count ? 1 : 0);
  Progress progress("plans", owned, context.options.progress && Progress::terminal());
  for (uint32_t i = 0; i < count; ++i) {
    if (!shard.owns(i)) {
      continue;
    }
    const uint64_t seed = first_seed + i;
    const std::vector<FaultEntry> faults = random_plan(seed, offered, chips);
    std::printf("plan %llu: %s\n", static_cast<unsigned long long>(seed),
                plan_yaml(seed, faults).c_str());
    std::fflush(stdout);
    // Drawn while the plan runs, below its plan line; erased before its result lines.
    progress.update(results.size(), fmt::format("plan {}", seed));
    RunResult result;
    result.kind = "plan";
    result.name = fmt::format("plan {}", seed);
    result.seed = seed;
    result.bug = context.bug;
    result.record = context.run(workload, seed, faults);
    InvariantContext invariants;
    invariants.timeout_ms = workload.timeout_ms;
    invariants.bug = context.bug;
    invariants.corruption_planned = std::any_of(
        faults.begin(), faults.end(), [](const auto& f) { return f.kind() == "corrupted_output"; });
    result.mismatches = invariant_violations(result.record, invariants);
    result.replay = replay_command(fmt::format("--campaign 1 --seed {}", seed), context.bug);
    progress.clear();
    std::fputs(result_lines(result).c_str(), stdout);
    std::fflush(stdout);
    if (on_result) {
      on_result(result, i);
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace runner
