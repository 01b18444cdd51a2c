// Campaigns (swarm testing): N random fault plans with seeds S, S+1, ... over a built-in
// workload, each plan enabling a random subset of the fault kinds the runtime offers, at
// random rates, and every run held to the invariants (scenario_checks.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runner/core/report/shard.hpp"
#include "runner/scenario/scenario_context.hpp"

namespace runner {

// The workload every plan runs: configure; two sequences prefilled and decoded interleaved;
// a KV allocated and freed; a kv_clear and a second prefill. `cases` is the golden set's size.
Scenario campaign_workload(uint32_t cases);

// The fault plan of seed `seed` over `offered` (kind, site) pairs.
std::vector<FaultEntry> random_plan(uint64_t seed, const std::vector<calrt::FaultHit>& offered,
                                    uint32_t chips);

// Runs plans first_seed .. first_seed + count - 1, printing `plan P: ...` and its result
// lines as it goes, and handing each result to `on_result` with its plan's index in the
// campaign when given (--jsonl). With a shard, only its plans run. Returns the results.
std::vector<RunResult> run_campaign(
    ScenarioContext& context, const Scenario& workload, uint64_t first_seed, uint32_t count,
    const std::vector<calrt::FaultHit>& offered, uint32_t chips, const Shard& shard = {},
    const std::function<void(const RunResult&, uint64_t)>& on_result = {});

}  // namespace runner
