// The op inventory of one graph: per op type, how many ops one chip runs and the FLOPs and
// bytes all chips move. Both chips of a tensor-parallel calbin run every layer, so the
// per-chip count is the graph's count.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "calbin/manifest.hpp"

namespace runner {

struct OpTotals {
  uint64_t count_per_chip = 0;  // the largest count over chips
  uint64_t flops = 0;           // summed over chips
  uint64_t bytes = 0;           // summed over chips
  bool chips_differ = false;    // chips run different numbers of this op
};

std::map<std::string, OpTotals> op_inventory(const calbin::Model& model);

}  // namespace runner
