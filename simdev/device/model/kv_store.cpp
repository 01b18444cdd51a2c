#include "simdev/device/model/kv_store.hpp"

#include <type_traits>
#include <utility>

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
  // Flips a bit of one stored element of the half drawn: BF16 keys, BF16 or int8 values.
  auto flip = [&](auto& stored) -> std::optional<std::pair<size_t, uint32_t>> {
    if (stored.empty()) {
      return std::nullopt;
    }
    using Stored = typename std::remove_reference_t<decltype(stored)>::value_type;
    using Bits = std::make_unsigned_t<Stored>;
    const size_t element = pick.below(stored.size());
    const auto bit = static_cast<uint32_t>(pick.below(8 * sizeof(Stored)));
    stored[element] = static_cast<Stored>(static_cast<Bits>(stored[element]) ^ (1u << bit));
    return std::pair{element, bit};
  };
  const auto flipped = keys        ? flip(cache.keys)
                       : kv.v_int8 ? flip(cache.values_s8)
                                   : flip(cache.values);
  if (!flipped) {
    return std::nullopt;
  }
  const auto [element, bit] = *flipped;
  return "layer " + std::to_string(layer) + (keys ? " keys" : " values") + " element " +
         std::to_string(element) + " bit " + std::to_string(bit);
}

}  // namespace simdev
