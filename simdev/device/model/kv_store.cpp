#include "simdev/device/model/kv_store.hpp"

#include "simdev/device/base/random_stream.hpp"

namespace simdev {

KvStore::KvStore(const ModelDims& dims) : chips_(dims.chips) {
  for (ChipKv& chip : chips_) {
    chip.layers.resize(dims.layers);
    chip.slot_stride = dims.kv_heads_local() * dims.head_dim;
    chip.heads = dims.kv_heads_local();
    chip.v_int8 = dims.v_int8;
  }
}

void KvStore::reserve_slots(size_t slot_count) {
  for (ChipKv& chip : chips_) {
    if (slot_count <= chip.slots) {
      continue;
    }
    for (LayerKv& layer : chip.layers) {
      layer.keys.resize(slot_count * chip.slot_stride, 0);
      if (chip.v_int8) {
        layer.values_s8.resize(slot_count * chip.slot_stride, 0);
        layer.value_scales.resize(slot_count * chip.heads, 0.0f);
      } else {
        layer.values.resize(slot_count * chip.slot_stride, 0);
      }
    }
    chip.slots = slot_count;
  }
}

void KvStore::clear() {
  for (ChipKv& chip : chips_) {
    for (LayerKv& layer : chip.layers) {
      layer = LayerKv{};
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
  LayerKv& cache = kv.layers[layer];
  // The stored bits of the half drawn: BF16 keys, and BF16 or int8 values.
  auto* bytes = keys || !kv.v_int8
                    ? reinterpret_cast<uint8_t*>(keys ? cache.keys.data() : cache.values.data())
                    : reinterpret_cast<uint8_t*>(cache.values_s8.data());
  const size_t element_bytes = keys || !kv.v_int8 ? 2 : 1;
  const size_t elements = keys        ? cache.keys.size()
                          : kv.v_int8 ? cache.values_s8.size()
                                      : cache.values.size();
  if (elements == 0) {
    return std::nullopt;
  }
  const size_t element = pick.below(elements);
  const auto bit = static_cast<uint32_t>(pick.below(8 * element_bytes));
  bytes[element * element_bytes + bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  return "layer " + std::to_string(layer) + (keys ? " keys" : " values") + " element " +
         std::to_string(element) + " bit " + std::to_string(bit);
}

}  // namespace simdev
