// A scenario file (scenarios/README.md) read and validated before anything runs: every key
// known, every value of the right type and vocabulary, the steps a coherent story (a sequence
// is prefilled before it is decoded, a KV exists before it is cleared or freed). An error
// names the file, its line, the field and the value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

#include "calbin/golden.hpp"
#include "runner/scenario/scenario_vocab.hpp"

namespace runner {

// One fault of the plan, its fields as the file wrote them (values canonical scalars), in
// file order: the runner hands them to the device as they are.
struct FaultEntry {
  std::vector<std::pair<std::string, std::string>> fields;
  std::string kind() const;
};

enum class StepKind { configure, prefill, decode, kv_allocate, kv_clear, kv_free, reset, idle };
const char* to_string(StepKind kind);

struct Step {
  StepKind kind = StepKind::configure;
  std::string seq;           // prefill, decode, kv_*
  uint32_t golden_case = 0;  // prefill: index into the calbin's golden cases
  uint32_t count = 0;        // decode: steps; kv_allocate: tokens
  calrt::ResetLevel level = calrt::ResetLevel::job_abort;  // reset
  uint64_t us = 0;                                         // idle
  int line = 0;                                            // in the file, for errors
};

struct Expect {
  std::optional<Outcome> outcome;
  std::optional<CalrtCode> first_error;
  std::optional<std::string> fault_class;  // none | request | model | device
  std::optional<calrt::DeviceState> device_state;
  // Outer: given or not; inner: a level, or none.
  std::optional<std::optional<calrt::ResetLevel>> recovered_by;
  std::optional<uint64_t> resets;
  std::optional<double> max_call_ms;
  std::vector<std::pair<std::string, bool>> sequences;  // name, ok
};

enum class SweepMode { transient, persistent };
const char* to_string(SweepMode mode);

struct SweepSpec {
  std::vector<std::string> kinds;  // empty: every kind the runtime offers
  std::vector<SweepMode> modes = {SweepMode::transient, SweepMode::persistent};
  std::vector<Outcome> allowed = {Outcome::pass, Outcome::recovered, Outcome::request_failed,
                                  Outcome::unrecoverable, Outcome::device_lost};
  uint32_t max_runs = 200;
};

inline constexpr uint32_t kDefaultTimeoutMs = 100;
inline constexpr uint32_t kDefaultMaxRecoveries = 3;

struct Scenario {
  std::string file;  // as given on the command line
  std::string name;  // the file's stem
  std::string description;
  std::string calbin;  // generator preset
  std::string device;  // Device_Create overrides, `key=value;...`
  uint64_t seed = 1;
  uint32_t timeout_ms = kDefaultTimeoutMs;
  uint32_t max_recoveries = kDefaultMaxRecoveries;
  std::vector<FaultEntry> faults;
  std::vector<Step> steps;
  std::optional<Expect> expect;
  std::vector<PolicyBug> negative_controls;
  std::optional<SweepSpec> sweep;

  // Every sequence name the steps use, in order of first use.
  std::vector<std::string> sequence_names() const;
};

// Reads and validates `file`; the error names file, line, field and value.
tl::expected<Scenario, std::string> read_scenario_file(const std::string& file);

// Checks what needs the calbin's golden set: every `case` index exists and no sequence
// decodes more steps than its case has golden steps.
std::string check_against_golden(const Scenario& scenario, const calbin::GoldenSet& golden);

// The plan handed to the device: `{seed: S, faults: [{kind: ..., ...}, ...]}` on one line.
std::string plan_yaml(uint64_t seed, const std::vector<FaultEntry>& faults);

}  // namespace runner
