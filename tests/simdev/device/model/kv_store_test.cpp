// The KV store's ECC fault: one flipped bit of one stored element, in the cache's own type.
#include "simdev/device/model/kv_store.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

namespace simdev {
namespace {

ModelDims dims_with(bool v_int8) {
  ModelDims dims;
  dims.layers = 2;
  dims.hidden = 64;
  dims.q_heads = 4;
  dims.kv_heads = 2;
  dims.head_dim = 8;
  dims.ffn = 64;
  dims.vocab = 32;
  dims.chips = 1;
  dims.v_int8 = v_int8;
  return dims;
}

// Bits that differ between two arrays of the same size.
template <class T>
int differing_bits(const std::vector<T>& a, const std::vector<T>& b) {
  int bits = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    using Bits = std::make_unsigned_t<T>;
    bits += std::popcount(static_cast<Bits>(static_cast<Bits>(a[i]) ^ static_cast<Bits>(b[i])));
  }
  return bits;
}

TEST(KvStore, AnEccFlipChangesOneBitOfTheStoredType) {
  for (const bool v_int8 : {false, true}) {
    KvStore store(dims_with(v_int8));
    store.reserve_slots(4);
    bool saw_keys = false;
    bool saw_values = false;
    for (uint64_t draw = 1; draw <= 64; ++draw) {
      const std::vector<LayerKv> before = store.chip(0).layers;
      const auto where = store.flip_bit(0, draw);
      ASSERT_TRUE(where);
      int changed = 0;
      for (size_t l = 0; l < before.size(); ++l) {
        const LayerKv& now = store.chip(0).layers[l];
        changed += differing_bits(before[l].keys, now.keys);
        changed += differing_bits(before[l].values, now.values);
        changed += differing_bits(before[l].values_s8, now.values_s8);
      }
      EXPECT_EQ(changed, 1) << *where;
      const bool values = where->find(" values ") != std::string::npos;
      (values ? saw_values : saw_keys) = true;
      const int bit = std::stoi(where->substr(where->rfind(' ') + 1));
      EXPECT_LT(bit, values && v_int8 ? 8 : 16) << *where;
    }
    EXPECT_TRUE(saw_keys && saw_values) << "v_int8 " << v_int8;
    // The int8 cache keeps no BF16 values, and the other way round.
    EXPECT_EQ(store.chip(0).layers[0].values.empty(), v_int8);
    EXPECT_EQ(store.chip(0).layers[0].values_s8.empty(), !v_int8);
  }
}

TEST(KvStore, AStoreWithNothingBackedHasNothingToFlip) {
  KvStore store(dims_with(true));
  EXPECT_FALSE(store.flip_bit(0, 1));
}

}  // namespace
}  // namespace simdev
