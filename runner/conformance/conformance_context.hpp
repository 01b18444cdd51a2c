// What one conformance clause works with: the runtime under test, raw calls that capture a
// code instead of throwing (clauses check codes the wrapper would turn into exceptions),
// fresh devices with a configured calbin, and a prefill job that can be held in flight.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "abi/calrt.hpp"
#include "abi/calrt_ext.h"
#include "calbin/manifest.hpp"
#include "runner/conformance/conformance.hpp"
#include "runner/core/session.hpp"

namespace runner {

// Thrown by a clause: the requirement does not hold (fail) or cannot be checked (skip).
struct ClauseFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ClauseSkip : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A call's result: its code and message, the error already destroyed.
struct CallOutcome {
  CalrtCode code = CALRT_OK;
  std::string message;
  bool ok() const { return code == CALRT_OK; }
};

// Every wait of the suite is bounded by this much device time.
inline constexpr calrt::Timeout kClauseWait = std::chrono::seconds(30);
inline constexpr uint64_t kClauseWaitNs = 30'000'000'000;
// Tokens of the clauses' prefill job: short, so that a clause costs little device time.
inline constexpr size_t kJobTokens = 16;
// KV handles of the clauses: small, so that several fit in any reservation.
inline constexpr uint32_t kJobKvTokens = 64;

// A device with the calbin (and, as far as asked, configured, the prefill model's buffers,
// a KV handle of the calbin's context applied, inputs written). Members in creation order:
// destroyed children first.
struct Fixture {
  calrt::Device device;
  calrt::Calbin calbin;
  calrt::CalbinInfo info;
  ModelIo prefill;
  calrt::Kv kv;
};

enum class Setup { device, calbin, configured, buffers, ready };

// What a clause needs of the device's clock. `real`: device time follows wall time, as on
// hardware; the simulator is asked for `clock=paced` (its default, virtual time, returns a
// timed-out wait at once).
enum class ClockNeed { any, real };

class ClauseContext {
 public:
  ClauseContext(const calrt::Api& runtime, const DeviceSpec& device_spec,
                const ConformanceOptions& run_options, const calbin::Manifest& host_manifest,
                CalrtGetApiFn* entry_point, const std::filesystem::path& scratch_dir)
      : api(runtime),
        spec(device_spec),
        options(run_options),
        manifest(host_manifest),
        get_api(entry_point),
        scratch(scratch_dir) {}

  const calrt::Api& api;
  const DeviceSpec& spec;
  const ConformanceOptions& options;
  const calbin::Manifest& manifest;  // the calbin as the host reads it
  CalrtGetApiFn* get_api;            // the backend's entry point; nullptr when unknown
  // A private (0700) directory for the clause's files. The suite's process owns and removes
  // it: a clause's process can be killed, or ended by the runtime, before its own cleanup.
  const std::filesystem::path& scratch;

  // Reads code and message of `error` and destroys it.
  CallOutcome take(CalrtError* error) const;

  calrt::Device open_device(ClockNeed clock = ClockNeed::any) const;
  Fixture fixture(Setup upto, uint32_t slot = 0, ClockNeed clock = ClockNeed::any) const;
  // The prefill (or another type's) model of the fixture's calbin, its I/O indices found by
  // role and name, with buffers on `slot`.
  ModelIo model_io(const Fixture& f, calrt::ModelType type, uint32_t slot = 0) const;
  // Writes `tokens` zero tokens at positions 0.. with matching CSRs into io's input.
  void write_inputs(ModelIo& io, size_t tokens) const;
  // A KV handle of `capacity` tokens (0: kJobKvTokens) applied to io's input.
  calrt::Kv apply_kv(const Fixture& f, ModelIo& io, uint32_t capacity = 0) const;
  calrt::Job submit(const Fixture& f, const ModelIo& io) const;

  // The calls clauses check the codes of, through the table. A buffer Buffer_Create makes
  // is released at once; a job Job_Submit makes goes to *job, or is cancelled and released
  // (a job created by a failing call is a failure of the clause).
  CallOutcome create_buffer(const Fixture& f, const std::string& model, int direction,
                            uint32_t slot = 0) const;
  CallOutcome submit_raw(const Fixture& f, const std::string& model, CalrtBuffer* input,
                         CalrtBuffer* output, calrt::Job* job = nullptr) const;
  CallOutcome wait_raw(CalrtJob* job, uint64_t timeout_ns, CalrtWaitResult* result = nullptr) const;

  bool has_fault() const;
  // Plans a job_hang of the next prefill compute; SKIPs (throws) without the extension.
  void plan_hang(const calrt::Device& device) const;
  void set_plan(const calrt::Device& device, const std::string& yaml) const;
  // Submits a prefill that stays in flight: slowed a millionfold when the fault extension
  // exists, else as submitted (SKIP when it is final already).
  calrt::Job submit_held(const Fixture& f, const ModelIo& io) const;
};

// Waits (bounded) for `job` to end and requires `want`; returns its status.
calrt::JobStatus expect_final(calrt::Job& job, calrt::JobState want, const std::string& what);

// Throws ClauseFailure with `what` unless `condition`.
void require(bool condition, const std::string& what);
// Throws ClauseFailure unless `outcome` has `code`: "<what>: expected X, got Y (message)".
void expect_code(const CallOutcome& outcome, CalrtCode code, const std::string& what);
// Throws ClauseFailure unless `outcome` has one of the two codes.
void expect_code(const CallOutcome& outcome, CalrtCode code, CalrtCode other,
                 const std::string& what);

// Stores a value that names no enumerator in an enum field, as a buggy or newer caller would
// (a static_cast of it is unspecified). Clauses keep such values inside the enum's value
// range (0, the COUNT_ sentinel): beyond it, merely loading the field is undefined
// behaviour in a C++ runtime, which UBSan turns into an abort.
template <class E>
void set_raw(E& field, int value) {
  static_assert(sizeof(E) == sizeof(int));
  std::memcpy(&field, &value, sizeof(field));
}

// A zero-initialised args struct with struct_size set for this header.
template <class T>
T args_of() {
  return calrt::detail::make_args<T>();
}

}  // namespace runner

// Calls table entry `Field` with `args` and captures the result as an CallOutcome.
#define CONF_CALL(ctx, Field, args) (ctx).take(CALRT_HPP_ENTRY((ctx).api, Field)(&(args)))
