#include "simdev/device/model/kv_store.hpp"

#include "simdev/device/base/random_stream.hpp"

namespace simdev {

KvStore::KvStore(const ModelDims& dims) : chips_(dims.chips) {
  for (ChipKv& chip : chips_) {
    chip.layers.resize(dims.layers);
    chip.slot_stride = dims.kv_heads_local() * dims.head_dim;
  }
}

void KvStore::reserve_slots(size_t slot_count) {
  for (ChipKv& chip : chips_) {
    if (slot_count <= chip.slots) {
      continue;
    }
    for (LayerKv& layer : chip.layers) {
      layer.keys.resize(slot_count * chip.slot_stride, 0);
      layer.values.resize(slot_count * chip.slot_stride, 0);
    }
    chip.slots = slot_count;
  }
}

void KvStore::clear() {
  for (ChipKv& chip : chips_) {
    for (LayerKv& layer : chip.layers) {
      layer.keys = {};
      layer.values = {};
    }
    chip.slots = 0;
  }
}

std::optional<std::string> KvStore::flip_bit(size_t chip, uint64_t draw) {
  if (chip >= chips_.size() || chips_[chip].slots == 0 || chips_[chip].layers.empty()) {
    return std::nullopt;
  }
  ChipKv& kv = chips_[chip];
  RandomStream pick(draw, "kv_ecc");
  const size_t layer = pick.below(kv.layers.size());
  const bool keys = pick.below(2) == 0;
  std::vector<uint16_t>& values = keys ? kv.layers[layer].keys : kv.layers[layer].values;
  if (values.empty()) {
    return std::nullopt;
  }
  const size_t element = pick.below(values.size());
  const auto bit = static_cast<uint32_t>(pick.below(16));
  values[element] = static_cast<uint16_t>(values[element] ^ (1u << bit));
  return "layer " + std::to_string(layer) + (keys ? " keys" : " values") + " element " +
         std::to_string(element) + " bit " + std::to_string(bit);
}

}  // namespace simdev
