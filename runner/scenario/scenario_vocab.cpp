#include "runner/scenario/scenario_vocab.hpp"

#include <algorithm>
#include <array>
#include <iterator>

namespace runner {
namespace {

template <class Enum, size_t N>
struct Names {
  std::array<std::pair<Enum, const char*>, N> entries;

  const char* name(Enum value) const {
    for (const auto& [v, text] : entries) {
      if (v == value) {
        return text;
      }
    }
    return "?";
  }
  std::optional<Enum> parse(std::string_view text) const {
    for (const auto& [v, name] : entries) {
      if (text == name) {
        return v;
      }
    }
    return std::nullopt;
  }
};

constexpr Names<Outcome, 5> kOutcomes{{{
    {Outcome::pass, "pass"},
    {Outcome::recovered, "recovered"},
    {Outcome::request_failed, "request_failed"},
    {Outcome::unrecoverable, "unrecoverable"},
    {Outcome::device_lost, "device_lost"},
}}};
constexpr std::array kOutcomeList = {Outcome::pass, Outcome::recovered, Outcome::request_failed,
                                     Outcome::unrecoverable, Outcome::device_lost};

constexpr Names<PolicyBug, 10> kBugs{{{
    {PolicyBug::none, "none"},
    {PolicyBug::no_reset, "no-reset"},
    {PolicyBug::no_timeout, "no-timeout"},
    {PolicyBug::single_level, "single-level"},
    {PolicyBug::no_reload, "no-reload"},
    {PolicyBug::no_replay, "no-replay"},
    {PolicyBug::lost_as_request, "lost-as-request"},
    {PolicyBug::skip_output_check, "skip-output-check"},
    {PolicyBug::reset_on_degraded, "reset-on-degraded"},
    {PolicyBug::reset_request_faults, "reset-request-faults"},
}}};
constexpr std::array kBugList = {
    PolicyBug::no_reset,          PolicyBug::no_timeout,        PolicyBug::single_level,
    PolicyBug::no_reload,         PolicyBug::no_replay,         PolicyBug::lost_as_request,
    PolicyBug::skip_output_check, PolicyBug::reset_on_degraded, PolicyBug::reset_request_faults};

constexpr Names<calrt::ResetLevel, 4> kLevels{{{
    {calrt::ResetLevel::job_abort, "job_abort"},
    {calrt::ResetLevel::cores, "cores"},
    {calrt::ResetLevel::chip, "chip"},
    {calrt::ResetLevel::full, "full"},
}}};

constexpr std::array kCodes = {CALRT_OK,
                               CALRT_INVALID_ARGUMENT,
                               CALRT_INVALID_HANDLE,
                               CALRT_NOT_FOUND,
                               CALRT_OUT_OF_RANGE,
                               CALRT_KV_EXHAUSTED,
                               CALRT_BUSY,
                               CALRT_WRONG_STATE,
                               CALRT_CANCELLED,
                               CALRT_STRUCT_TOO_SMALL,
                               CALRT_UNIMPLEMENTED,
                               CALRT_BUFFER_REUSE,
                               CALRT_PERMISSION_DENIED,
                               CALRT_PREEMPTED,
                               CALRT_CALBIN_INVALID,
                               CALRT_CALBIN_MISMATCH,
                               CALRT_NOT_CONFIGURED,
                               CALRT_OUT_OF_DEVICE_MEMORY,
                               CALRT_DMA_ERROR,
                               CALRT_DEVICE_HUNG,
                               CALRT_DEVICE_LOST,
                               CALRT_FIRMWARE_CRASH,
                               CALRT_ECC_UNCORRECTABLE,
                               CALRT_D2D_LINK_DOWN,
                               CALRT_INTERNAL};

constexpr std::array<std::string_view, 13> kFaultKinds = {
    "dma_h2d",           "dma_d2h",          "job_hang",       "chip_hang",     "ecc_correctable",
    "ecc_uncorrectable", "device_lost",      "firmware_crash", "d2d_link_down", "thermal_throttle",
    "kv_exhaustion",     "corrupted_output", "slow_completion"};
constexpr std::array<std::string_view, 6> kFaultSites = {"configure", "prefill", "decode",
                                                         "kv_update", "kv",      "any"};

}  // namespace

const char* to_string(Outcome outcome) { return kOutcomes.name(outcome); }
std::optional<Outcome> parse_outcome(std::string_view text) { return kOutcomes.parse(text); }
std::span<const Outcome> all_outcomes() { return kOutcomeList; }

const char* to_string(PolicyBug bug) { return kBugs.name(bug); }
std::optional<PolicyBug> parse_policy_bug(std::string_view text) { return kBugs.parse(text); }
std::span<const PolicyBug> all_policy_bugs() { return kBugList; }

const char* to_string(calrt::ResetLevel level) { return kLevels.name(level); }
std::optional<calrt::ResetLevel> parse_reset_level(std::string_view text) {
  return kLevels.parse(text);
}

std::optional<calrt::DeviceState> parse_device_state(std::string_view text) {
  for (int s = 1; s < static_cast<int>(calrt::DeviceState::count_); ++s) {
    const auto state = static_cast<calrt::DeviceState>(s);
    if (text == calrt::to_string(state)) {
      return state;
    }
  }
  return std::nullopt;
}

std::optional<CalrtCode> parse_code(std::string_view text) {
  for (const CalrtCode code : kCodes) {
    if (text == calrt::code_name(code)) {
      return code;
    }
  }
  return std::nullopt;
}

const char* fault_class_name(CalrtCode code) {
  return code == CALRT_OK ? "none" : calrt::to_string(calrt::fault_class_of(code));
}

bool is_fault_class_name(std::string_view text) {
  return text == "none" || text == "request" || text == "model" || text == "device";
}

bool is_fault_kind(std::string_view text) {
  return std::find(kFaultKinds.begin(), kFaultKinds.end(), text) != kFaultKinds.end();
}

bool is_fault_site(std::string_view text) {
  return std::find(kFaultSites.begin(), kFaultSites.end(), text) != kFaultSites.end();
}

std::span<const std::string_view> fault_kinds() { return kFaultKinds; }

}  // namespace runner
