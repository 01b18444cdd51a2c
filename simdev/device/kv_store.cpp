#include "simdev/device/kv_store.hpp"

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

}  // namespace simdev
