#include "runner/scenario/scenario_context.hpp"

namespace runner {
namespace {

// A probe device: long enough for Device_Create of a simulator, bounded for real hardware.
constexpr calrt::Timeout kProbeTimeout = std::chrono::seconds(30);

}  // namespace

RunRecord ScenarioContext::run(const Scenario& scenario, uint64_t seed,
                               const std::vector<FaultEntry>& faults) {
  RunSpec spec;
  spec.scenario = &scenario;
  spec.seed = seed;
  spec.faults = faults;
  spec.bug = bug;
  spec.device = &device;
  spec.api = &api;
  const auto calbin = calbins.get(scenario.calbin);
  if (!calbin) {
    RunRecord record;
    record.engine_errors.push_back(calbin.error());
    return record;
  }
  spec.calbin = *calbin;
  RunRecord record = run_scenario_steps(spec);
  coverage.add(record.hits);
  return record;
}

ScenarioContext::Offer ScenarioContext::offered_faults() {
  DeviceSpec probe = device;
  probe.config = "seed=1";
  const calrt::Device dev = open_device(api, probe, kProbeTimeout);
  Offer offer;
  offer.chips = dev.status().chip_count;
  if (const auto faults = calrt::DeviceFaults::of(dev)) {
    offer.faults = faults.hits();
  }
  return offer;
}

std::string ScenarioContext::check_device_and_plan(const Scenario& scenario, uint64_t seed,
                                                   const std::vector<FaultEntry>& faults) {
  DeviceSpec probe = device;
  probe.config = device_config(scenario, seed);
  calrt::Device dev;
  try {
    dev = open_device(api, probe, kProbeTimeout);
  } catch (const calrt::Error& error) {
    return scenario.file + ": device: '" + scenario.device +
           "': the runtime refuses these device options: " + error.what();
  }
  const auto fault_ext = calrt::DeviceFaults::of(dev);
  if (!fault_ext) {
    return faults.empty() ? std::string()
                          : scenario.file +
                                ": faults: the runtime offers no fault injection "
                                "(CALRT_EXT_FAULT); run fault scenarios on the simulator";
  }
  try {
    fault_ext.set_plan(plan_yaml(seed, faults));
  } catch (const calrt::Error& error) {
    return scenario.file + ": faults: the device refuses the plan " + plan_yaml(seed, faults) +
           ": " + error.what();
  }
  return {};
}

std::string replay_command(const std::string& args, PolicyBug bug) {
  std::string command = "calrt scenario " + args;
  if (bug != PolicyBug::none) {
    command += std::string(" --policy-bug ") + to_string(bug);
  }
  return command;
}

}  // namespace runner
