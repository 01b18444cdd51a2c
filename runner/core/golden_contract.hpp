// The contract rows of a golden set that came without them (a vendor's or a user's FP32
// golden): computed from the calbin's own weight files when the calbin is in this project's
// format, so that the device is held to its declared numerics bit for bit and the FP32
// gates open to the contract's distance from that golden (runner/README.md, "A golden
// without contract rows").
#pragma once

#include <string>

#include <tl/expected.hpp>

#include "runner/core/host_inputs.hpp"

namespace runner {

// Where the selected cases' contract rows come from, for the report and the summary.
struct ContractSource {
  bool available = false;
  std::string description;  // "the golden set", "computed from the calbin's weights", or why none
};

// Gives the selected cases the contract rows `options.contract` asks for: "auto" keeps the
// golden's and computes missing ones from a calbin whose weights MODEL.md describes (a
// calbin that cannot be recomputed is no error: the smoke then judges on the FP32 golden
// alone and says so); "golden" takes the golden's only; "computed" replaces them by the
// calbin's (an error when it cannot); "none" drops them. Weights that cannot be read are bad
// input, naming the file.
tl::expected<ContractSource, std::string> complete_contract_rows(const SmokeOptions& options,
                                                                 HostInputs& inputs);

}  // namespace runner
