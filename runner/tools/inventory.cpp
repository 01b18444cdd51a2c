#include "runner/tools/inventory.hpp"

#include <algorithm>

namespace runner {

std::map<std::string, OpTotals> op_inventory(const calbin::Model& model) {
  std::map<std::string, OpTotals> totals;
  std::map<std::string, std::map<uint32_t, uint64_t>> per_chip;
  for (const calbin::ChipOps& chip : model.ops) {
    for (const calbin::Op& op : chip.ops) {
      OpTotals& t = totals[op.type];
      t.flops += op.flops;
      t.bytes += op.bytes;
      ++per_chip[op.type][chip.chip];
    }
  }
  for (auto& [type, t] : totals) {
    const auto& counts = per_chip[type];
    for (const auto& [chip, count] : counts) {
      t.chips_differ |= t.count_per_chip != 0 && count != t.count_per_chip;
      t.count_per_chip = std::max(t.count_per_chip, count);
    }
    t.chips_differ |= counts.size() != model.ops.size();
  }
  return totals;
}

}  // namespace runner
