// What every run of one `calrt scenario` invocation shares: the runtime, the calbins, the
// policy bug under test and the coverage summed over the runs; and the two questions asked
// of a throw-away device before anything runs (which faults the runtime offers, whether it
// accepts a scenario's device options and plan).
#pragma once

#include <string>
#include <vector>

#include "abi/calrt_ext.hpp"
#include "runner/core/device/calbin_cache.hpp"
#include "runner/core/device/device_select.hpp"
#include "runner/scenario/scenario_engine.hpp"
#include "runner/scenario/scenario_options.hpp"
#include "runner/scenario/scenario_report.hpp"

namespace runner {

struct ScenarioContext {
  explicit ScenarioContext(const ScenarioOptions& o) : options(o), calbins(o.calbin_dir) {}

  const ScenarioOptions& options;
  DeviceSpec device;
  calrt::Api api;
  CalbinStore calbins;
  PolicyBug bug = PolicyBug::none;
  Coverage coverage;

  // One run of `scenario`'s steps with `faults` (its calbin must load); adds its hits to the
  // coverage.
  RunRecord run(const Scenario& scenario, uint64_t seed, const std::vector<FaultEntry>& faults);

  // The (kind, site) pairs the runtime can inject at (counts 0), empty without the fault
  // extension, and how many chips a device has. Throws calrt::Error when no device opens.
  struct Offer {
    std::vector<calrt::FaultHit> faults;
    uint32_t chips = 0;
  };
  Offer offered_faults();

  // Empty when a device opens with the scenario's options and accepts the plan; otherwise
  // the error, naming the file and the field (bad input).
  std::string check_device_and_plan(const Scenario& scenario, uint64_t seed,
                                    const std::vector<FaultEntry>& faults);
};

// "replay: calrt scenario ARGS[ --policy-bug B]" without the prefix: the command line.
std::string replay_command(const std::string& args, PolicyBug bug);

}  // namespace runner
