// `calrt replay`: re-issues a call recording of the validation layer (calrt-calls/1,
// abi/validate/README.md) against a runtime, usually the simulator, and compares what the
// runtime answers with what was recorded: a stream seen on hardware becomes a test.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "abi/calrt.hpp"

namespace runner {

struct ReplayOptions {
  std::filesystem::path file;
  std::string device = "sim";                   // "sim" or a runtime library path
  std::optional<std::filesystem::path> calbin;  // replaces every recorded Calbin_Create path
  std::optional<std::filesystem::path> json;
};

struct Divergence {
  uint64_t seq = 0;
  std::string call;
  std::string what;  // "code", "state", "sha256", ...
  std::string expected;
  std::string got;
};

struct ReplayResult {
  uint64_t calls = 0;    // calls re-issued
  uint64_t skipped = 0;  // calls the layer refused when recording: they never reached a runtime
  std::vector<Divergence> divergences;
  // The line number of a last line cut short (a recording stopped mid-write, e.g. by a kill):
  // the calls before it are replayed, and the report says that the end is missing; 0: none.
  size_t cut_line = 0;
};

// A recording that cannot be replayed: the message names the file, the line and the field.
class ReplayInputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Replays `file` through `api`. Throws ReplayInputError for a bad recording.
ReplayResult replay_recording(const calrt::Api& api, const std::filesystem::path& file,
                              const std::optional<std::filesystem::path>& calbin = std::nullopt);

// "seq 12 Job_Wait: state: expected COMPLETED, got FAILED"
std::string describe(const Divergence& divergence);

// The subcommand: 0 identical, 1 divergences, 2 bad input. Never throws.
int run_replay(const ReplayOptions& options);

}  // namespace runner
