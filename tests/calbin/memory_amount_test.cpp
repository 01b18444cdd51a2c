// Byte quantities with units, dtype sizes and tensor byte sizes.
#include <gtest/gtest.h>

#include "calbin/manifest.hpp"

namespace calbin {
namespace {

std::optional<uint64_t> bytes_of(uint64_t value, const char* unit) {
  return MemoryAmount{value, unit}.bytes();
}

TEST(MemoryAmount, BinaryUnits) {
  EXPECT_EQ(bytes_of(7, "B"), 7u);
  EXPECT_EQ(bytes_of(2, "KiB"), 2048u);
  EXPECT_EQ(bytes_of(12, "MiB"), 12u << 20);
  EXPECT_EQ(bytes_of(3, "GiB"), uint64_t{3} << 30);
  EXPECT_EQ(bytes_of(1, "TiB"), uint64_t{1} << 40);
}

TEST(MemoryAmount, DecimalUnits) {
  EXPECT_EQ(bytes_of(2, "KB"), 2000u);
  EXPECT_EQ(bytes_of(3, "MB"), 3000000u);
  EXPECT_EQ(bytes_of(16, "GB"), 16000000000u);
  EXPECT_EQ(bytes_of(1, "TB"), 1000000000000u);
}

TEST(MemoryAmount, UnknownUnitsAreNotGuessed) {
  EXPECT_EQ(bytes_of(1, "mb"), std::nullopt);
  EXPECT_EQ(bytes_of(1, "MiB "), std::nullopt);
  EXPECT_EQ(bytes_of(1, ""), std::nullopt);
  EXPECT_EQ(bytes_of(1, "PiB"), std::nullopt);
}

TEST(MemoryAmount, OverflowIsNullopt) {
  // The reference calbin's impossible "16777216 MB" still fits; 2^44 TiB does not.
  EXPECT_EQ(bytes_of(16777216, "MB"), uint64_t{16777216} * 1000000);
  EXPECT_EQ(bytes_of(uint64_t{1} << 24, "TiB"), std::nullopt);
  EXPECT_EQ(bytes_of(UINT64_MAX, "KB"), std::nullopt);
  EXPECT_EQ(bytes_of(UINT64_MAX, "B"), UINT64_MAX);
  EXPECT_EQ(bytes_of(0, "TB"), 0u);
}

TEST(Dtypes, NamesRoundTripAndUnknownIsRejected) {
  for (const Dtype dtype :
       {Dtype::kInt8, Dtype::kInt32, Dtype::kBf16, Dtype::kF16, Dtype::kF32, Dtype::kInt4}) {
    EXPECT_EQ(parse_dtype(to_string(dtype)), dtype);
  }
  EXPECT_EQ(parse_dtype("fp8"), std::nullopt);
  EXPECT_EQ(parse_dtype("BF16"), std::nullopt);
  EXPECT_EQ(dtype_bits(Dtype::kInt4), 4u);
  EXPECT_EQ(dtype_bits(Dtype::kBf16), 16u);
  EXPECT_EQ(parse_model_type("kv_update"), ModelType::kKvUpdate);
  EXPECT_EQ(parse_model_type("Prefill"), std::nullopt);
  EXPECT_EQ(parse_tensor_role("logits"), TensorRole::kLogits);
  EXPECT_EQ(to_string(TensorRole::kPosition), "position");
}

TEST(TensorBytes, RowMajorAndInt4Rounding) {
  EXPECT_EQ(tensor_bytes({1, 151936}, Dtype::kBf16, {}), 303872u);
  EXPECT_EQ(tensor_bytes({3}, Dtype::kInt4, {}), 2u);  // 12 bits round up to 2 bytes
  EXPECT_EQ(tensor_bytes({}, Dtype::kF32, {}), 4u);    // a scalar
}

TEST(TensorBytes, TiledPadsTheLastDimension) {
  const Layout tiled{Layout::Kind::kTiled, 16};
  EXPECT_EQ(tensor_bytes({2, 17}, Dtype::kBf16, tiled), 2u * 32 * 2);
  EXPECT_EQ(tensor_bytes({2, 16}, Dtype::kBf16, tiled), 2u * 16 * 2);
  EXPECT_EQ(tensor_bytes({2, 17}, Dtype::kBf16, Layout{Layout::Kind::kTiled, 0}), std::nullopt);
}

TEST(TensorBytes, OverflowAndInvalidDimensionsAreNullopt) {
  EXPECT_EQ(tensor_bytes({INT64_MAX, 2}, Dtype::kInt8, {}), std::nullopt);
  EXPECT_EQ(tensor_bytes({int64_t{1} << 61}, Dtype::kF32, {}), std::nullopt);  // bits overflow
  EXPECT_EQ(tensor_bytes({INT64_MAX}, Dtype::kInt8, Layout{Layout::Kind::kTiled, 16}),
            std::nullopt);
  EXPECT_EQ(tensor_bytes({0, 4}, Dtype::kInt8, {}), std::nullopt);
  EXPECT_EQ(tensor_bytes({-1}, Dtype::kInt8, {}), std::nullopt);
}

}  // namespace
}  // namespace calbin
