// The words of scenario files and reports (scenarios/README.md): outcomes, the runner's
// policy bugs, reset levels, device states, status codes and fault classes, each with its
// spelling in files and its parser. One table per word list, so files, output and JSON agree.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "abi/calrt.hpp"

namespace runner {

// Ordered as scenarios/README.md's table: when several apply, the later one wins.
enum class Outcome { pass, recovered, request_failed, unrecoverable, device_lost };
const char* to_string(Outcome outcome);
std::optional<Outcome> parse_outcome(std::string_view text);
std::span<const Outcome> all_outcomes();

// Deliberate defects of the recovery policy for negative controls; each changes exactly one
// decision of it. Never use outside tests.
enum class PolicyBug {
  none,
  no_reset,              // after a device fault, retry the step as is
  no_timeout,            // wait with an infinite timeout
  single_level,          // only try job_abort, and believe it worked
  no_reload,             // never configure the model again (after chip/full, on model faults)
  no_replay,             // after a recovery, do not re-run the lost work
  lost_as_request,       // treat DEVICE_LOST as a request error and go on
  skip_output_check,     // do not compare outputs with golden
  reset_on_degraded,     // reset the device when a chip reports DEGRADED
  reset_request_faults,  // reset the device after a request-class error
};
const char* to_string(PolicyBug bug);  // "no-reset", ...; "none"
std::optional<PolicyBug> parse_policy_bug(std::string_view text);
std::span<const PolicyBug> all_policy_bugs();  // without none

const char* to_string(calrt::ResetLevel level);  // "job_abort", "cores", "chip", "full"
std::optional<calrt::ResetLevel> parse_reset_level(std::string_view text);

std::optional<calrt::DeviceState> parse_device_state(std::string_view text);  // "CONFIGURED"
std::optional<CalrtCode> parse_code(std::string_view text);                   // "DMA_ERROR", "OK"

// "none" for CALRT_OK, else request|model|device.
const char* fault_class_name(CalrtCode code);
bool is_fault_class_name(std::string_view text);

// The fault plan's vocabulary (simdev/device/FAULTS.md), checked before a plan reaches the
// device so that a typo is reported with the scenario file's name and line.
bool is_fault_kind(std::string_view text);
bool is_fault_site(std::string_view text);  // configure, prefill, decode, kv_update, kv, any
std::span<const std::string_view> fault_kinds();

}  // namespace runner
