// The int8 matmul through Eigen's FP32 GEMM, bit for bit the reference kernel's result
// (kernels.hpp). Each product of two int8 values is an integer of at most 128 x 128 = 2^14, so
// a sum over at most kExactBlock inputs stays within 2^24, where every integer is a float:
// the GEMM's FMAs are exact in any order, and the int32 sums of the blocks are the reference's
// int32 accumulation. The GEMM pays where a weight row serves many activation rows (a prefill
// chunk); converting the weights to FP32 costs as much as one row's dot products, so a few
// rows stay on the reference loops (kernels::int8_matmul decides).
#pragma once

#include <cstddef>
#include <cstdint>

namespace simdev::kernels::eigen {

inline constexpr size_t kExactBlock = 1024;  // 1024 x 2^14 = 2^24

// Same contract and result as kernels::int8_matmul_reference. Call only where
// kernels::eigen_available() says the CPU runs this build of it.
void int8_matmul(const int8_t* a, const float* a_scales, size_t rows, size_t in, const int8_t* w,
                 const float* w_scales, size_t out_features, float* out);

}  // namespace simdev::kernels::eigen
