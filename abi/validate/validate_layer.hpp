// validate_layer.hpp: a CalRT runtime that wraps another one, checks usage invariants no
// vendor runtime checks, and records the call stream at the ABI boundary (README.md here).
//
// Vulkan's validation layers are the model: the layer is selected like any runtime, forwards
// every call to the runtime it wraps, and only interferes with calls that break an invariant.
// The recording is what `calrt replay` re-issues against the simulator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "abi/calrt.h"

namespace calrt::validate {

struct Options {
  std::string record_path;  // JSON Lines recording (calrt-calls/1); empty: no recording
  bool refuse = true;       // a violating call is not forwarded and fails (else: reported only)
  std::string inner_name;   // the wrapped runtime's name, written into the recording's header
};

struct Violation {
  std::string id;       // e.g. "KV.apply-after-free" (README.md lists them)
  std::string call;     // the ABI call it fired on, e.g. "Kv_Apply"
  std::string message;  // "validate: <id>: ..." naming the handles and values
  bool refused = false;
};

class Layer {
 public:
  virtual ~Layer() = default;
  // The wrapped table. Valid while the Layer lives.
  virtual const CalrtApi* api() const = 0;
  virtual std::vector<Violation> violations() const = 0;
  // Calls recorded so far (0 without a recording).
  virtual uint64_t recorded_calls() const = 0;
};

// Wraps `inner` (a table for CALRT_ABI_MAJOR). `inner_keepalive` owns whatever keeps the
// inner table valid (a loaded library) and is released with the layer. Throws
// std::invalid_argument for a NULL or unusable inner table, std::runtime_error when the
// recording file cannot be created (naming it), std::length_error when every one of the
// process's layer slots is taken (kMaxLayers live layers).
std::unique_ptr<Layer> wrap(const CalrtApi* inner, Options options,
                            std::shared_ptr<const void> inner_keepalive = {});

inline constexpr int kMaxLayers = 16;

// The recording's schema name.
inline constexpr const char* kRecordSchema = "calrt-calls/1";

}  // namespace calrt::validate
