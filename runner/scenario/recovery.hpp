// The device side of the scenario runner's recovery policy (scenarios/README.md): the hang
// report taken before anything is reset, the self-test that follows every reset, and the
// reset ladder job_abort -> cores -> chip -> full that stops at the first level whose
// self-test passes. What is re-run afterwards is the engine's business.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "abi/calrt_ext.hpp"
#include "runner/scenario/scenario_calls.hpp"
#include "runner/scenario/scenario_vocab.hpp"

namespace runner {

// A reset's own bound, apart from the scenario's wait timeout: the longest reset level takes
// far longer than a decode step, and a reset cut short leaves the device faulted.
inline constexpr std::chrono::milliseconds kResetTimeout{1000};

struct SelfTest {
  bool passed = false;
  bool lost = false;
  std::string detail;  // "state CONFIGURED, chips OK OK"
};

struct LadderResult {
  std::optional<calrt::ResetLevel> level;  // the level that recovered the device
  bool lost = false;
};

class Recovery {
 public:
  // Where the recovery says what it did (the run's events).
  using EventSink = std::function<void(std::string)>;
  Recovery(calrt::Device& device, CallMeter& meter, PolicyBug bug, EventSink events)
      : device_(device), meter_(meter), bug_(bug), event_(std::move(events)) {}

  // The hang report, parsed (a report that is not JSON is kept as {"text": ...}); none
  // without the diag extension or when the runtime refuses it.
  std::optional<nlohmann::json> hang_report();

  // Device state OPEN or CONFIGURED and every chip OK or DEGRADED.
  SelfTest self_test();

  // One Device_Reset, counted and timed; throws calrt::Error.
  calrt::DeviceState reset(calrt::ResetLevel level);

  // Climbs the ladder (only job_abort, believed, under the single-level bug). `on_reset`
  // runs after every reset call made, whatever its result: from chip up the device dropped
  // its configuration even when the self-test then fails.
  LadderResult climb(const std::function<void(calrt::ResetLevel)>& on_reset);

  uint64_t resets() const { return resets_; }

 private:
  calrt::Device& device_;
  CallMeter& meter_;
  PolicyBug bug_;
  EventSink event_;
  uint64_t resets_ = 0;
};

}  // namespace runner
