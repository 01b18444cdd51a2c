#include "simdev/gen/weights/param_blocks.hpp"

#include <bit>
#include <cstring>
#include <fstream>

#include "simdev/gen/weights/shard.hpp"

namespace simdev::gen {
namespace {

static_assert(std::endian::native == std::endian::little, "param files are little-endian");

template <class T>
std::span<const uint8_t> as_bytes(const std::vector<T>& values) {
  return {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(T)};
}

// Appends at the next aligned offset and returns that offset.
uint64_t append_aligned(BlockImage& block, std::span<const uint8_t> bytes) {
  const uint64_t offset = param_aligned(block.bytes.size());
  block.bytes.resize(offset);
  block.bytes.insert(block.bytes.end(), bytes.begin(), bytes.end());
  return offset;
}

// Raw row-major bytes of the whole tensor, int4 values one per byte, and the element size.
std::span<const uint8_t> tensor_bytes_of(const StoredWeight& weight, size_t* element_bytes) {
  if (weight.spec.storage == Storage::kBf16) {
    *element_bytes = 2;
    return as_bytes(weight.bf16);
  }
  *element_bytes = 1;
  return as_bytes(weight.quantised.values);
}

// The scales a shard carries (MODEL.md). w8a8_dynamic: an axis-0 shard its rows', an axis-1
// shard every row's, because each row was scaled as a whole before the split. w4af16: the
// groups of the shard's own rows and columns, [rows][cols / group].
std::vector<float> scales_for(const StoredWeight& weight, int axis, ShardRange range) {
  const QuantisedMatrix& q = weight.quantised;
  const size_t per_row = q.groups_per_row();
  const bool whole_rows = axis != 1 || weight.spec.storage == Storage::kInt8Rows;
  const ShardRange rows = axis == 0 ? range : ShardRange{0, q.rows};
  const ShardRange groups =
      whole_rows ? ShardRange{0, per_row} : ShardRange{range.begin / q.group, range.end / q.group};
  std::vector<float> out;
  for (uint64_t r = rows.begin; r < rows.end; ++r) {
    const auto first = q.scales.begin() + static_cast<std::ptrdiff_t>(r * per_row);
    out.insert(out.end(), first + static_cast<std::ptrdiff_t>(groups.begin),
               first + static_cast<std::ptrdiff_t>(groups.end));
  }
  return out;
}

// Places one shard: its values (`data`, one element per byte for quantised tensors, packed
// here for int4) and, for a quantised tensor, its scales right after.
void place(BlockImage& block, const StoredWeight& weight, std::span<const uint8_t> data,
           calbin::Shard shard, int axis, ShardRange range, ParamLayout& layout) {
  const Storage storage = weight.spec.storage;
  calbin::WeightTensor entry = manifest_entry(weight.spec);
  entry.shard = shard;
  entry.file = block.file;
  if (storage == Storage::kInt4Groups) {
    const std::vector<uint8_t> packed =
        pack_int4({reinterpret_cast<const int8_t*>(data.data()), data.size()});
    entry.offset = append_aligned(block, packed);
    entry.bytes = packed.size();
  } else {
    entry.offset = append_aligned(block, data);
    entry.bytes = data.size();
  }
  if (storage != Storage::kBf16) {
    const std::vector<float> scales = scales_for(weight, axis, range);
    entry.quant.scheme = quant_scheme(storage);
    entry.quant.scale_file = block.file;
    entry.quant.scale_offset = append_aligned(block, as_bytes(scales));
    entry.quant.scale_count = scales.size();
    entry.quant.group_size = storage == Storage::kInt4Groups ? weight.spec.group : 0;
  }
  layout.entries.push_back(std::move(entry));
}

void place_replicated(const StoredWeight& weight, uint32_t all_chips, ParamLayout& layout) {
  size_t element_bytes = 0;
  const std::span<const uint8_t> data = tensor_bytes_of(weight, &element_bytes);
  const auto rows = static_cast<uint64_t>(weight.spec.shape.at(0));
  const calbin::Shard shard{-1, 0, 1, 0, rows, all_chips};
  place(layout.blocks[0], weight, data, shard, -1, {0, rows}, layout);
}

void place_sharded(const StoredWeight& weight, uint32_t chips, ParamLayout& layout) {
  size_t element_bytes = 0;
  const std::span<const uint8_t> data = tensor_bytes_of(weight, &element_bytes);
  const int axis = weight.spec.split_axis;
  const auto rows = static_cast<size_t>(weight.spec.shape.at(0));
  const auto cols = static_cast<size_t>(weight.spec.shape.at(1));
  const uint64_t extent = axis == 0 ? rows : cols;
  for (uint32_t chip = 0; chip < chips; ++chip) {
    const ShardRange range = shard_range(extent, chip, chips);
    const std::vector<uint8_t> slice = slice_matrix(data, rows, cols, element_bytes, axis, range);
    const calbin::Shard shard{axis, chip, chips, range.begin, range.end, 1u << chip};
    place(layout.blocks[1 + chip], weight, slice, shard, axis, range, layout);
  }
}

}  // namespace

ParamLayout layout_param_blocks(const ModelConfig& config,
                                const std::vector<StoredWeight>& weights) {
  ParamLayout layout;
  const uint32_t all_chips = (1u << config.chips) - 1;
  layout.blocks.push_back({"param_blk0", "param_blk0.bin", all_chips, {}});
  for (uint32_t chip = 0; chip < config.chips; ++chip) {
    const std::string name = "param_blk" + std::to_string(chip + 1);
    layout.blocks.push_back({name, name + ".bin", 1u << chip, {}});
  }
  for (const StoredWeight& weight : weights) {
    if (weight.spec.split_axis < 0) {
      place_replicated(weight, all_chips, layout);
    } else {
      place_sharded(weight, config.chips, layout);
    }
  }
  // Pad every block to the alignment so that blocks loaded back to back stay aligned.
  for (BlockImage& block : layout.blocks) {
    append_aligned(block, {});
  }
  return layout;
}

calbin::Result<void> write_param_blocks(const std::filesystem::path& dir,
                                        const ParamLayout& layout) {
  for (const BlockImage& block : layout.blocks) {
    const std::filesystem::path path = dir / block.file;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(block.bytes.data()),
              static_cast<std::streamsize>(block.bytes.size()));
    out.close();
    if (!out) {
      return calbin::fail(path.string(), "", "cannot write the param block");
    }
  }
  return {};
}

uint64_t param_bytes_for_chip(const ParamLayout& layout, uint32_t chip) {
  uint64_t total = 0;
  for (const BlockImage& block : layout.blocks) {
    if ((block.chip_mask >> chip) & 1u) {
      total += block.bytes.size();
    }
  }
  return total;
}

}  // namespace simdev::gen
