// Exhaustive sweeps in the SQLite manner (scenarios/README.md): for each fault kind, in
// transient and persistent mode, the scenario's steps run with the fault at the 1st, 2nd, ...
// eligible device operation until a run sees no injection (or max_runs); every outcome must
// be allowed and every run hold the campaign invariants.
#pragma once

#include <string>
#include <vector>

#include "runner/scenario/scenario_context.hpp"

namespace runner {

// One result per (kind, mode), each printed as it finishes. `offered` lists the (kind, site)
// pairs the runtime injects at; `kinds: all` sweeps each kind in it once.
std::vector<SweepResult> run_sweep(ScenarioContext& context, const Scenario& scenario,
                                   const SweepSpec& sweep, uint64_t seed,
                                   const std::vector<calrt::FaultHit>& offered);

}  // namespace runner
