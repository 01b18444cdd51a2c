#include "simdev/gen/timing/declared_weights.hpp"

#include <string>

#include "simdev/gen/weights/param_blocks.hpp"
#include "simdev/gen/weights/quantize.hpp"
#include "simdev/gen/weights/shard.hpp"

namespace simdev::gen {
namespace {

uint64_t product(const std::vector<int64_t>& shape, size_t first, size_t last) {
  uint64_t count = 1;
  for (size_t i = first; i < last; ++i) {
    count *= static_cast<uint64_t>(shape[i]);
  }
  return count;
}

// f32 scales the shard carries; `stored` is the shard's own shape.
calbin::Result<uint64_t> scale_count(const WeightSpec& spec, const std::vector<int64_t>& stored) {
  const size_t rank = spec.shape.size();
  if (spec.storage == Storage::kInt8Rows) {
    // A row is scaled as a whole before any split, so an input-axis shard keeps every row.
    const bool input_axis = spec.split_axis == static_cast<int>(rank) - 1;
    return product(input_axis ? spec.shape : stored, 0, rank - 1);
  }
  if (spec.storage == Storage::kInt4Groups) {
    const uint64_t inputs = static_cast<uint64_t>(stored.back());
    if (spec.group == 0 || inputs % spec.group != 0) {
      return calbin::fail("preset", spec.name,
                          "a shard row of " + std::to_string(inputs) +
                              " inputs does not split into w4af16 groups of " +
                              std::to_string(spec.group));
    }
    return product(stored, 0, rank) / spec.group;
  }
  return uint64_t{0};
}

calbin::Result<calbin::WeightTensor> declare_shard(const WeightSpec& spec, calbin::Shard shard) {
  std::vector<int64_t> stored = spec.shape;
  if (shard.axis >= 0) {
    stored[static_cast<size_t>(shard.axis)] = static_cast<int64_t>(shard.end - shard.begin);
  }
  auto scales = scale_count(spec, stored);
  if (!scales) {
    return tl::unexpected(scales.error());
  }
  calbin::WeightTensor entry = manifest_entry(spec);
  entry.quant.scheme = quant_scheme(spec.storage);
  entry.quant.scale_count = *scales;
  entry.quant.group_size = spec.storage == Storage::kInt4Groups ? spec.group : 0;
  entry.shard = shard;
  const uint64_t bits = calbin::dtype_bits(entry.dtype);
  entry.bytes = (product(stored, 0, stored.size()) * bits + 7) / 8;
  return entry;
}

std::vector<calbin::Shard> shards_of(const WeightSpec& spec, uint32_t chips) {
  if (spec.split_axis < 0) {
    const auto rows = static_cast<uint64_t>(spec.shape.at(0));
    return {calbin::Shard{-1, 0, 1, 0, rows, (1u << chips) - 1}};
  }
  const auto axis = static_cast<size_t>(spec.split_axis);
  std::vector<calbin::Shard> out;
  for (uint32_t chip = 0; chip < chips; ++chip) {
    const ShardRange range = shard_range(static_cast<uint64_t>(spec.shape.at(axis)), chip, chips);
    out.push_back({spec.split_axis, chip, chips, range.begin, range.end, 1u << chip});
  }
  return out;
}

}  // namespace

calbin::Result<std::vector<calbin::WeightTensor>> declare_weights(
    const std::vector<WeightSpec>& specs, uint32_t chips) {
  std::vector<calbin::WeightTensor> entries;
  for (const WeightSpec& spec : specs) {
    for (const calbin::Shard& shard : shards_of(spec, chips)) {
      auto entry = declare_shard(spec, shard);
      if (!entry) {
        return tl::unexpected(entry.error());
      }
      entries.push_back(std::move(*entry));
    }
  }
  return entries;
}

uint64_t declared_param_bytes(const std::vector<calbin::WeightTensor>& entries, uint32_t chip) {
  uint64_t total = 0;
  for (const calbin::WeightTensor& entry : entries) {
    if ((entry.shard.chip_mask >> chip) & 1u) {
      total += param_aligned(entry.bytes) + param_aligned(entry.quant.scale_count * sizeof(float));
    }
  }
  return total;
}

}  // namespace simdev::gen
