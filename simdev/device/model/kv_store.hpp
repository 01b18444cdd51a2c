// The contents of one KV handle: per chip, per layer, the BF16 keys and the values of the
// chip's KV heads, laid out [slot][kv_head_local][head_dim]. Values are BF16, or int8 with
// one FP32 scale per [slot][kv_head_local] when the calbin's v_dtype is int8. Host memory
// grows with the highest slot written, so thousands of mostly empty handles stay cheap;
// slots never written read as 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "simdev/device/model/model_dims.hpp"

namespace simdev {

struct LayerKv {
  std::vector<uint16_t> keys;
  std::vector<uint16_t> values;     // BF16 V-cache
  std::vector<int8_t> values_s8;    // int8 V-cache
  std::vector<float> value_scales;  // int8 V-cache: [slot][kv_head_local]
};

struct ChipKv {
  std::vector<LayerKv> layers;
  size_t slot_stride = 0;  // kv_heads_local * head_dim elements per slot
  size_t heads = 0;        // kv_heads_local
  size_t slots = 0;        // slots backed by memory
  bool v_int8 = false;
};

class KvStore {
 public:
  KvStore() = default;
  explicit KvStore(const ModelDims& dims);

  // Backs at least slot_count slots on every chip with zeroed memory.
  void reserve_slots(size_t slot_count);
  // Drops all contents: every slot reads as zero again.
  void clear();

  // An uncorrectable ECC error (FAULTS.md): flips one bit of chip `chip`'s stored keys or
  // values, chosen by `draw` among the backed slots. Returns where ("layer 1 values element
  // 37 bit 5"), or nullopt when the chip holds no KV contents to flip.
  std::optional<std::string> flip_bit(size_t chip, uint64_t draw);

  ChipKv& chip(size_t index) { return chips_[index]; }
  const ChipKv& chip(size_t index) const { return chips_[index]; }
  size_t chip_count() const { return chips_.size(); }  // 0 for a timing-only calbin's KV
  size_t backed_slots() const { return chips_.empty() ? 0 : chips_[0].slots; }

 private:
  std::vector<ChipKv> chips_;
};

}  // namespace simdev
