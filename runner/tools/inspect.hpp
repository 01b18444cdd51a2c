// `calrt inspect CALBIN`: what a calbin holds, device-free: version and provenance, models
// with their I/O tensors, CSRs and ping/pong slots, an op inventory per graph, and a memory
// map per chip.
#pragma once

#include <filesystem>

namespace runner {

struct InspectOptions {
  std::filesystem::path calbin;
  std::filesystem::path json;  // empty: no JSON report
  double usable_gib_per_chip = 16.0;
};

int run_inspect(const InspectOptions& options);

}  // namespace runner
