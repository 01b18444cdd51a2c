// The handle codec both runtimes use (simdev/device/base/handle_codec.hpp): what is packed
// comes back, and a value of another kind or without a generation is no handle.
#include <gtest/gtest.h>

#include "simdev/device/base/handle_codec.hpp"

namespace simdev {
namespace {

TEST(HandleCodec, PackedFieldsComeBack) {
  const ObjectId id{kMaxObjects - 1, 0xFFFFFFFFu};
  const uintptr_t value = encode_handle(HandleKind::kKv, kMaxDevices - 1, id);
  const auto decoded = decode_handle(value, HandleKind::kKv);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->first, kMaxDevices - 1);
  EXPECT_EQ(decoded->second, id);
  // The layout, high bits to low: kind, device slot, index, generation.
  EXPECT_EQ(encode_handle(HandleKind::kBuffer, 2, ObjectId{3, 4}), 0x3020000300000004u);
}

TEST(HandleCodec, AnotherKindOrNoGenerationIsNoHandle) {
  const uintptr_t job = encode_handle(HandleKind::kJob, 1, ObjectId{7, 9});
  EXPECT_FALSE(decode_handle(job, HandleKind::kBuffer).has_value());
  EXPECT_TRUE(decode_handle(job, HandleKind::kJob).has_value());
  EXPECT_FALSE(decode_handle(encode_handle(HandleKind::kJob, 1, ObjectId{7, 0}), HandleKind::kJob)
                   .has_value());
  EXPECT_FALSE(decode_handle(0, HandleKind::kDevice).has_value());
}

}  // namespace
}  // namespace simdev
